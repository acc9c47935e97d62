//! Who a client is and what it may do: SASL authentication ([`sasl`]) and ACL authorization
//! ([`acl`]).
//!
//! Must never: touch sockets or the request dispatch; the connection asks, these answer.

pub mod acl;
pub mod sasl;
