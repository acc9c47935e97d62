//! What several handlers share, and the only way one handler reaches another's code: the brokers
//! a client is told about ([`brokers`]), what this broker serves and the hand-off of group requests ([`leadership`]), the config resources and
//! the topic-config path of the config APIs ([`config_resources`]), the mapping of storage
//! errors to error codes ([`errors`]), who may create a topic ([`topic_access`]), the gate
//! and filters of the ACL and SCRAM admin APIs ([`security_admin`]), and one request's side of
//! the client quotas ([`throttle`]), the transaction APIs' hand-off to the coordinator
//! ([`txn`]), and the time a request waits on others, left out of its service time ([`remote`]).
//!
//! Must never: hold one handler's request logic, or import a handler (the checker,
//! `scripts/import-cycles.py`, fails a handler that imports another outside this folder).

pub(crate) mod brokers;
pub(crate) mod config_resources;
pub(crate) mod errors;
pub(crate) mod leadership;
pub(crate) mod remote;
pub(crate) mod security_admin;
pub(crate) mod throttle;
pub(crate) mod topic_access;
pub(crate) mod txn;
