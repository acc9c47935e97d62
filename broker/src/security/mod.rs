//! Who a client is and what it may do: SASL authentication ([`sasl`]), the name of a TLS client
//! certificate's subject ([`x500_name`]) and the user name `ssl.principal.mapping.rules` make of
//! it ([`ssl_principal_mapper`]), and ACL authorization ([`acl`]).
//!
//! Must never: touch sockets or the request dispatch; the connection asks, these answer.

pub mod acl;
pub mod sasl;
pub mod ssl_principal_mapper;
pub(crate) mod x500_name;
