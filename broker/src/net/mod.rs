//! The network edge: listeners and the accept loop ([`server`]), which connections the limits
//! admit and which idle one makes room ([`admission`]), the open-file limit they must fit
//! ([`fd_limit`]), one task per connection that
//! reads frames and writes responses in order ([`connection`]), the writer that carries out a
//! response plan (`crate::response`) with sendfile and lazily converted parts ([`send`]), the
//! TLS handshake of TLS listeners (their acceptors are `crate::tls`'s), and the optional capture of request frames for the replay corpus
//! ([`frame_capture`]).
//!
//! Must never: decide what a request means (that is `handlers`) or decode request bodies (that is
//! `skiff-protocol`). What a connection knows about its client is `crate::security::session`.

pub(crate) mod admission;
pub(crate) mod connection;
pub mod fd_limit;
pub mod frame_capture;
pub(crate) mod send;
pub(crate) mod server;
