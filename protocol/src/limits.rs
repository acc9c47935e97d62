//! Every named limit of the protocol crate: frame size, and the maxima each bounded decoder checks a
//! peer's counts and lengths against before it allocates. One constant per concept, each saying why.
//!
//! Must never: hold a limit that is not used by a check, or repeat a number that another module
//! also writes down.

// ---- Requests and framing (requests engineer) -------------------------------------------------

/// Largest request frame accepted by default (the body after the 4-byte size prefix), in bytes.
/// Kafka's `socket.request.max.bytes` default is 100 MiB; a frame above it is rejected before any
/// buffer is sized for it.
pub const REQUEST_BYTES_MAX_DEFAULT: usize = 100 * 1024 * 1024;

/// Bytes of the size prefix that precedes every request and response.
pub const FRAME_PREFIX_BYTES: usize = 4;

/// Topics in one request (Metadata, Produce, Fetch, ListOffsets, OffsetCommit, OffsetFetch,
/// CreateTopics, DeleteTopics, CreatePartitions, forgotten topics). Far above any real client (a Metadata request for
/// a whole cluster is sent as "all topics", not a list) and small enough that a `Vec` of this many
/// decoded structs stays in the tens of megabytes.
pub const TOPICS_PER_REQUEST_MAX: usize = 100_000;

/// Partitions one topic may have, and so partitions listed for one topic in one request (Produce,
/// Fetch, ListOffsets, offsets APIs, CreateTopics and CreatePartitions assignments): the broker refuses to create more
/// (INVALID_PARTITIONS), so no valid request names more. Each partition costs open files and index
/// mappings on its broker.
pub const PARTITIONS_PER_TOPIC_MAX: usize = 10_000;

/// Members named in one group request (SyncGroup assignments, LeaveGroup batches).
pub const GROUP_MEMBERS_MAX: usize = 10_000;

/// Assignment protocols a member offers in one JoinGroup request (real clients send 1–3).
pub const GROUP_PROTOCOLS_MAX: usize = 1_000;

/// Groups named in one request (DescribeGroups, OffsetFetch v8+, FindCoordinator v4+ keys,
/// ListGroups filters).
pub const GROUPS_PER_REQUEST_MAX: usize = 10_000;

/// Config resources or config entries in one request (DescribeConfigs, AlterConfigs,
/// IncrementalAlterConfigs, CreateTopics configs).
pub const CONFIGS_PER_REQUEST_MAX: usize = 10_000;

/// Replica broker ids in one partition assignment (CreateTopics, CreatePartitions).
pub const REPLICAS_PER_PARTITION_MAX: usize = 1_000;

/// Brokers in one DescribeCluster answer a client reads (as many as a partition may have
/// replicas: Skiff's clusters stay far below it).
pub const BROKERS_PER_RESPONSE_MAX: usize = REPLICAS_PER_PARTITION_MAX;

/// Aborted transactions in one partition of a Fetch response read by a follower (Kafka bounds
/// them only by the response size; a leader lists those overlapping the fetched range).
pub const ABORTED_TRANSACTIONS_PER_PARTITION_MAX: usize = 100_000;

/// Transactions named in one request: AddPartitionsToTxn v4+ batches (one entry per transactional
/// id a leader verifies for), WriteTxnMarkers markers (one per ended transaction), DescribeTransactions
/// ids, ListTransactions state and producer-id filters. A coordinator batches what it has pending
/// for one broker; Kafka bounds these only by the frame size.
pub const TRANSACTIONS_PER_REQUEST_MAX: usize = 100_000;

/// Tagged fields in one tagged-field section. Kafka's schemas define at most a handful per struct.
pub const TAGGED_FIELDS_MAX: usize = 64;

/// Bytes of one string field. Kafka refuses strings longer than `i16::MAX` even in the compact
/// (varint-length) encoding, so a compact string cannot be larger than a classic one.
pub const STRING_BYTES_MAX: usize = i16::MAX as usize;

/// Array elements in one request, summed over every array in it. Each array's count is already
/// bounded by its own maximum and by the bytes remaining, but a decoded element takes several
/// times its wire size in memory (a 6-byte flexible Produce partition becomes a ~70-byte struct),
/// so this budget keeps one 100 MiB frame from decoding into gigabytes.
pub const ELEMENTS_PER_REQUEST_MAX: usize = 1_000_000;

// ---- Records and conversion (records engineer) ------------------------------------------------

/// Cap on the decompressed size of one v2 batch or legacy wrapper, in bytes. A batch is at most
/// `message.max.bytes` compressed (about 1 MiB by default; topics may raise it) and text compresses
/// 10–50×, so 64 MiB leaves room for both while bounding the memory of one decompression.
pub const DECOMPRESSED_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Source bytes the down-converter converts per chunk. A chunk is whole batches up to this size, at
/// least one. Kafka's `MAX_READ_SIZE`, the fastest of 16 KiB … 1 MiB in KIP-283's measurements. On
/// Skiff's bench machine 256 KiB was 3–12 % faster on legacy fetch in three runs, but with 100 slow
/// legacy consumers it took the broker's peak RSS from 90 MiB to 125–133 MiB, past the 128 MiB the
/// memory bound promises (`bench/reports/kip283-findings.md`), so 128 KiB stays.
pub const DOWN_CONVERT_CHUNK_BYTES: usize = 128 * 1024;

/// Most source bytes the down-converter asks for in one read while it writes, in bytes (at least
/// one whole batch): a chunk is built from several reads, so converting it needs one read's bytes
/// beside the chunk rather than a whole chunk of source (the broker holds them only while it
/// converts). The 128 KiB source piece was 30 % of a slow legacy response's heap
/// (`bench/reports/kip283-findings.md`, session 4). Once a batch's length is known the read is cut
/// to whole batches, so a smaller read costs more `pread` calls, not more bytes read.
pub const DOWN_CONVERT_READ_BYTES: usize = 32 * 1024;
const _: () = assert!(DOWN_CONVERT_READ_BYTES <= DOWN_CONVERT_CHUNK_BYTES);

/// Largest single source batch the down-converter asks the broker for, in bytes. Bounds one
/// conversion's source buffer; a stored batch above it ends conversion (padding) or, as the first
/// batch, is an error (MESSAGE_TOO_LARGE).
pub const DOWN_CONVERT_BATCH_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Most ACL creations or filters one CreateAcls or DeleteAcls request may carry: far above what
/// `kafka-acls.sh` sends (one per principal, host and operation).
pub const ACLS_PER_REQUEST_MAX: usize = 10_000;

/// Most users one AlterUserScramCredentials or DescribeUserScramCredentials request may name.
pub const SCRAM_USERS_PER_REQUEST_MAX: usize = 10_000;

/// Quota entries or filter components in one AlterClientQuotas or DescribeClientQuotas request,
/// and entity parts or quota operations in one entry: an operator's tool sends a handful.
pub const QUOTA_ENTRIES_PER_REQUEST_MAX: usize = 10_000;
