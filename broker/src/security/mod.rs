//! Who a client is and what it may do: SASL authentication ([`sasl`]), the name of a TLS client
//! certificate's subject ([`x500_name`]) and the user name `ssl.principal.mapping.rules` make of
//! it ([`ssl_principal_mapper`]), ACL authorization ([`acl`]), and the [`session`] a connection
//! establishes (principal, listener, security protocol) that handlers and ACLs read.
//!
//! Must never: touch sockets or the request dispatch (the connection asks, these answer), or read
//! the broker's `Config` (whoever builds these passes in the values they need).

pub mod acl;
pub mod sasl;
pub mod session;
pub mod ssl_principal_mapper;
pub(crate) mod x500_name;
