//! What operators see and what runs in the background for them: the HTTP endpoint that serves
//! the Prometheus metrics of [`crate::metrics`] and the status page ([`http`], [`status`]), and
//! periodic maintenance such as
//! retention and flushing ([`maintenance`]), the log cleaner's threads ([`cleaner`]);
//! `skiff placement status` reads the endpoint ([`placement_status`]).
//!
//! Must never: sit on a request's path beyond counting it.

pub(crate) mod cleaner;
pub(crate) mod http;
pub(crate) mod maintenance;
pub mod placement_status;
pub mod status;
