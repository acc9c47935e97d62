//! Request decoder tests: round trips against kafka-protocol's encoder for every API and version
//! (sample messages come from the decoders themselves, driven by a generating [`Source`]), hostile
//! counts planted at every length field, truncation, trailing bytes.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::source::{Source, TaggedFields};
use super::*;
use crate::api::{PENDING_APIS, SUPPORTED_APIS};

/// A [`Source`] that makes up values (small arrays, short strings, nulls, unknown tags) from a
/// seed, so that running a decoder over it yields a message valid for exactly that version.
struct SampleSource {
    state: u64,
}

impl SampleSource {
    fn new(seed: u64) -> Self {
        Self {
            state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        }
    }
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn int(&mut self) -> i64 {
        match self.below(4) {
            0 => 0,
            1 => -1,
            2 => self.below(100) as i64,
            _ => self.next() as i64,
        }
    }
    fn blob(&mut self) -> Vec<u8> {
        let len = self.below(8) as usize;
        (0..len).map(|_| b'a' + self.below(26) as u8).collect()
    }
}

impl Source for SampleSource {
    fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(self.int() as i8)
    }
    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(self.int() as i16)
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(self.int() as i32)
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(self.int())
    }
    fn bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.below(2) == 0)
    }
    fn uuid(&mut self) -> Result<Uuid, DecodeError> {
        Ok(if self.below(3) == 0 {
            Uuid::nil()
        } else {
            Uuid::from_u64_pair(self.next(), self.next())
        })
    }
    fn nullable_string(&mut self, _compact: bool) -> Result<Option<StrBytes>, DecodeError> {
        Ok((self.below(5) != 0)
            .then(|| StrBytes::from_string(String::from_utf8(self.blob()).unwrap())))
    }
    fn nullable_bytes(&mut self, _compact: bool) -> Result<Option<Bytes>, DecodeError> {
        Ok((self.below(5) != 0).then(|| Bytes::from(self.blob())))
    }
    fn array_len(&mut self, _: bool, _: usize, _: usize) -> Result<Option<usize>, DecodeError> {
        Ok((self.below(6) != 0).then(|| self.below(3) as usize))
    }
    fn non_null_array_len(&mut self, _: bool, _: usize, _: usize) -> Result<usize, DecodeError> {
        Ok(self.below(3) as usize)
    }
    fn string(&mut self, _compact: bool) -> Result<StrBytes, DecodeError> {
        Ok(StrBytes::from_string(
            String::from_utf8(self.blob()).unwrap(),
        ))
    }
    fn bytes(&mut self, _compact: bool) -> Result<Bytes, DecodeError> {
        Ok(Bytes::from(self.blob()))
    }
    fn tagged_fields(&mut self) -> Result<Vec<(u32, Bytes)>, DecodeError> {
        // Tags 10+ are unknown to every schema Skiff decodes.
        Ok(if self.below(3) == 0 {
            vec![(10 + self.below(5) as u32, Bytes::from(self.blob()))]
        } else {
            Vec::new()
        })
    }
}

/// A [`Source`] that writes the smallest valid encoding the decoder asks for (every array holds
/// one element, every string is empty) and, at the `plant_index`-th length or count, writes a huge
/// value and stops. The bytes written are a tiny body whose one length lies.
struct PlantSource {
    out: Vec<u8>,
    lengths_seen: usize,
    plant_index: usize,
    planted: bool,
}

const PLANTED: DecodeError = DecodeError::Invalid { reason: "planted" };

impl PlantSource {
    fn new(plant_index: usize) -> Self {
        Self {
            out: Vec::new(),
            lengths_seen: 0,
            plant_index,
            planted: false,
        }
    }
    /// Whether this length is the one to lie about; if so writes the lie and aborts.
    fn plant(&mut self, classic_huge: &[u8], compact: bool) -> Result<(), DecodeError> {
        let here = self.lengths_seen;
        self.lengths_seen += 1;
        if here == self.plant_index {
            if compact {
                self.out.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
            } else {
                self.out.extend_from_slice(classic_huge);
            }
            self.planted = true;
            return Err(PLANTED);
        }
        Ok(())
    }
}

impl Source for PlantSource {
    fn i8(&mut self) -> Result<i8, DecodeError> {
        self.out.push(0);
        Ok(0)
    }
    fn i16(&mut self) -> Result<i16, DecodeError> {
        self.out.extend_from_slice(&[0; 2]);
        Ok(0)
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        self.out.extend_from_slice(&[0; 4]);
        Ok(0)
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        self.out.extend_from_slice(&[0; 8]);
        Ok(0)
    }
    fn bool(&mut self) -> Result<bool, DecodeError> {
        self.out.push(0);
        Ok(false)
    }
    fn uuid(&mut self) -> Result<Uuid, DecodeError> {
        self.out.extend_from_slice(&[0; 16]);
        Ok(Uuid::nil())
    }
    fn nullable_string(&mut self, compact: bool) -> Result<Option<StrBytes>, DecodeError> {
        self.plant(&[0x7f, 0xff], compact)?;
        self.out
            .extend_from_slice(if compact { &[1][..] } else { &[0, 0][..] });
        Ok(Some(StrBytes::default()))
    }
    fn nullable_bytes(&mut self, compact: bool) -> Result<Option<Bytes>, DecodeError> {
        self.plant(&[0x7f, 0xff, 0xff, 0xff], compact)?;
        self.out
            .extend_from_slice(if compact { &[1][..] } else { &[0, 0, 0, 0][..] });
        Ok(Some(Bytes::new()))
    }
    fn array_len(
        &mut self,
        compact: bool,
        _: usize,
        _: usize,
    ) -> Result<Option<usize>, DecodeError> {
        self.plant(&[0x7f, 0xff, 0xff, 0xff], compact)?;
        self.out
            .extend_from_slice(if compact { &[2][..] } else { &[0, 0, 0, 1][..] });
        Ok(Some(1))
    }
    fn tagged_fields(&mut self) -> Result<Vec<(u32, Bytes)>, DecodeError> {
        self.plant(&[], true)?;
        self.out.push(0);
        Ok(Vec::new())
    }
}

/// Every (api, version) a decoder exists for: the supported table, widened by the pending rows.
fn all_versions() -> impl Iterator<Item = (ApiKey, i16)> {
    let pending_only = PENDING_APIS
        .iter()
        .filter(|row| crate::api::supported(row.api_key).is_none());
    SUPPORTED_APIS
        .iter()
        .chain(pending_only)
        .map(|row| crate::api::decodable(row.api_key).unwrap())
        .flat_map(|row| {
            (row.version_min..=row.version_max).map(move |version| (row.api_key, version))
        })
}

/// decode(encode(x)) == x for `seed_count` sample messages of `api_key` at `version`, and every
/// strict prefix of each encoding is an error, and so is one garbage byte after it.
fn round_trip(api_key: ApiKey, version: i16, seed_count: u64) {
    let mut accepted = 0u64;
    for seed in 0..seed_count {
        let Ok(sample) = decode_from(&mut SampleSource::new(seed), api_key, version) else {
            continue; // e.g. a null the version forbids
        };
        accepted += 1;
        let body = sample
            .encode_body(version)
            .unwrap_or_else(|error| panic!("{api_key:?} v{version} seed {seed}: {error}"))
            .freeze();
        let decoded = decode_pending_body(api_key, version, &body).unwrap_or_else(|error| {
            panic!("{api_key:?} v{version} seed {seed}: {error} {body:02x?}")
        });
        assert_eq!(decoded, sample, "{api_key:?} v{version} seed {seed}");
        for cut in 0..body.len() {
            assert!(
                decode_pending_body(api_key, version, &body.slice(..cut)).is_err(),
                "{api_key:?} v{version} seed {seed}: prefix {cut} accepted"
            );
        }
        let mut garbage = body.to_vec();
        garbage.push(0);
        assert!(matches!(
            decode_pending_body(api_key, version, &Bytes::from(garbage)),
            Err(DecodeError::TrailingBytes { trailing_bytes: 1 })
        ));
    }
    assert!(
        accepted * 2 >= seed_count,
        "{api_key:?} v{version}: only {accepted} samples"
    );
}

#[test]
fn every_api_and_version_round_trips_through_kafka_protocol() {
    for (api_key, version) in all_versions() {
        round_trip(api_key, version, 40);
    }
}

/// Plants a huge count or length at every length field the decoder reads, in turn; each tiny
/// body must be a clean error. Returns how many length fields were tried.
fn huge_counts_are_errors(api_key: ApiKey, version: i16) -> usize {
    for plant_index in 0.. {
        let mut plant = PlantSource::new(plant_index);
        let result = decode_from(&mut plant, api_key, version);
        if !plant.planted {
            assert!(result.is_ok(), "{api_key:?} v{version}: {result:?}");
            return plant_index;
        }
        let body = Bytes::from(plant.out);
        assert!(body.len() < 256);
        let decoded = decode_pending_body(api_key, version, &body);
        assert!(
            matches!(
                decoded,
                Err(DecodeError::Truncated { .. } | DecodeError::CountTooLarge { .. })
            ),
            "{api_key:?} v{version} length #{plant_index}: {decoded:?} from {body:02x?}"
        );
    }
    unreachable!()
}

macro_rules! per_api_tests {
    ($( $module:ident: $key:ident; )*) => {$(
        mod $module {
            use super::*;

            #[test]
            fn tiny_input_huge_count_is_an_error() {
                let row = crate::api::decodable(ApiKey::$key).unwrap();
                let mut lengths_tried = 0;
                for version in row.version_min..=row.version_max {
                    lengths_tried += huge_counts_are_errors(ApiKey::$key, version);
                }
                assert!(lengths_tried > 0 || ApiKey::$key == ApiKey::ApiVersions);
            }

            #[test]
            fn round_trips_many_seeds() {
                let row = crate::api::decodable(ApiKey::$key).unwrap();
                round_trip(ApiKey::$key, row.version_min, 200);
                round_trip(ApiKey::$key, row.version_max, 200);
            }
        }
    )*};
}

per_api_tests! {
    produce: Produce;
    fetch: Fetch;
    list_offsets: ListOffsets;
    metadata: Metadata;
    offset_commit: OffsetCommit;
    offset_fetch: OffsetFetch;
    find_coordinator: FindCoordinator;
    join_group: JoinGroup;
    heartbeat: Heartbeat;
    leave_group: LeaveGroup;
    sync_group: SyncGroup;
    describe_groups: DescribeGroups;
    list_groups: ListGroups;
    sasl_handshake: SaslHandshake;
    api_versions: ApiVersions;
    create_topics: CreateTopics;
    delete_topics: DeleteTopics;
    init_producer_id: InitProducerId;
    offset_for_leader_epoch: OffsetForLeaderEpoch;
    describe_configs: DescribeConfigs;
    sasl_authenticate: SaslAuthenticate;
    alter_configs: AlterConfigs;
    create_partitions: CreatePartitions;
    incremental_alter_configs: IncrementalAlterConfigs;
    delete_records: DeleteRecords;
    describe_log_dirs: DescribeLogDirs;
    delete_groups: DeleteGroups;
    list_partition_reassignments: ListPartitionReassignments;
    offset_delete: OffsetDelete;
    elect_leaders: ElectLeaders;
    alter_partition_reassignments: AlterPartitionReassignments;
    describe_acls: DescribeAcls;
    create_acls: CreateAcls;
    delete_acls: DeleteAcls;
    describe_user_scram_credentials: DescribeUserScramCredentials;
    alter_user_scram_credentials: AlterUserScramCredentials;
    describe_cluster: DescribeCluster;
    describe_client_quotas: DescribeClientQuotas;
    alter_client_quotas: AlterClientQuotas;
    add_partitions_to_txn: AddPartitionsToTxn;
    add_offsets_to_txn: AddOffsetsToTxn;
    end_txn: EndTxn;
    write_txn_markers: WriteTxnMarkers;
    txn_offset_commit: TxnOffsetCommit;
    describe_producers: DescribeProducers;
    describe_transactions: DescribeTransactions;
    list_transactions: ListTransactions;
    consumer_group_heartbeat: ConsumerGroupHeartbeat;
    consumer_group_describe: ConsumerGroupDescribe;
}

#[test]
fn every_supported_api_has_a_decoder_and_a_test_module() {
    for (api_key, version) in all_versions() {
        let plant = decode_from(&mut PlantSource::new(usize::MAX), api_key, version);
        assert!(plant.is_ok(), "{api_key:?} v{version}");
    }
}

#[test]
fn metadata_7fffffff_is_a_clean_error() {
    let body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff]);
    for version in 0..=8 {
        assert!(matches!(
            decode_body(ApiKey::Metadata, version, &body),
            Err(DecodeError::Truncated { .. } | DecodeError::CountTooLarge { .. })
        ));
    }
}

#[test]
fn fetch_cluster_id_tag_is_decoded() {
    let request = FetchRequest::default()
        .with_cluster_id(Some(StrBytes::from_static_str("skiff")))
        .with_unknown_tagged_fields(BTreeMap::from([(7, Bytes::from_static(b"x"))]));
    for version in 12..=13 {
        let body = Request::Fetch(request.clone())
            .encode_body(version)
            .unwrap()
            .freeze();
        assert_eq!(
            decode_body(ApiKey::Fetch, version, &body),
            Ok(Request::Fetch(request.clone()))
        );
    }
}

#[test]
fn legacy_fetch_v0_bytes() {
    // Fetch v0 from docs/design/downconversion.md §2.2: replica -1, max wait 100, min bytes 1,
    // topic "t" partition 0 offset 5 max 1 MiB.
    let body = Bytes::from_static(&[
        0xff, 0xff, 0xff, 0xff, 0, 0, 0, 100, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0x10, 0, 0,
    ]);
    let Ok(Request::Fetch(fetch)) = decode_body(ApiKey::Fetch, 0, &body) else {
        panic!()
    };
    assert_eq!(fetch.max_bytes, 0x7fff_ffff);
    assert_eq!(fetch.session_epoch, -1);
    assert_eq!(fetch.topics[0].topic.0.as_str(), "t");
    assert_eq!(fetch.topics[0].partitions[0].fetch_offset, 5);
    assert_eq!(fetch.topics[0].partitions[0].partition_max_bytes, 1 << 20);
}

#[test]
fn produce_records_share_the_frame() {
    let records = Bytes::from_static(b"not parsed here");
    let request = ProduceRequest::default().with_acks(1).with_topic_data(vec![
        kafka_protocol::messages::produce_request::TopicProduceData::default()
            .with_name(kafka_protocol::messages::TopicName(
                StrBytes::from_static_str("t"),
            ))
            .with_partition_data(vec![
                kafka_protocol::messages::produce_request::PartitionProduceData::default()
                    .with_records(Some(records.clone())),
            ]),
    ]);
    let body = Request::Produce(request).encode_body(2).unwrap().freeze();
    let Ok(Request::Produce(decoded)) = decode_body(ApiKey::Produce, 2, &body) else {
        panic!()
    };
    let shared = decoded.topic_data[0].partition_data[0]
        .records
        .clone()
        .unwrap();
    assert_eq!(shared, records);
    let frame_range = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
    assert!(
        frame_range.contains(&(shared.as_ptr() as usize)),
        "records were copied"
    );
}

#[test]
fn whole_frames_decode_and_name_their_errors() {
    use kafka_protocol::messages::RequestHeader;
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Metadata as i16)
        .with_request_api_version(1)
        .with_correlation_id(12)
        .with_client_id(Some(StrBytes::from_static_str("c")));
    let mut frame = bytes::BytesMut::new();
    header.encode(&mut frame, 1).unwrap();
    let body = Request::Metadata(MetadataRequest::default())
        .encode_body(1)
        .unwrap();
    frame.extend_from_slice(&body);
    let frame = frame.freeze();
    let (decoded_header, request) = decode_request(&frame).unwrap();
    assert_eq!(decoded_header, header);
    assert_eq!(request, Request::Metadata(MetadataRequest::default()));

    // Bytes after the schema are ignored, as Kafka ignores them.
    let mut garbage = frame.to_vec();
    garbage.push(1);
    assert_eq!(decode_request(&Bytes::from(garbage)), Ok((header, request)));
    let truncated = frame.slice(..frame.len() - 1);
    assert!(matches!(
        decode_request(&truncated),
        Err(RequestError::Body {
            correlation_id: 12,
            ..
        })
    ));
}

#[test]
fn unsupported_versions_are_refused_by_body_decoding() {
    assert!(decode_body(ApiKey::Fetch, 14, &Bytes::new()).is_err());
    assert!(decode_body(ApiKey::ApiVersions, 4, &Bytes::new()).is_err());
    assert!(decode_body(ApiKey::LeaderAndIsr, 0, &Bytes::new()).is_err());
}

#[allow(dead_code)]
fn _tagged_type_is_kafka_protocols(fields: TaggedFields) -> BTreeMap<i32, Bytes> {
    fields
}

#[test]
fn element_budget_spans_the_whole_request() {
    // Fetch v0 with 110 topics of 10 000 partitions each: every count is at most its own maximum
    // and backed by bytes, but together they break the per-request element budget at topic 100.
    let partitions_count = crate::limits::PARTITIONS_PER_TOPIC_MAX;
    let mut body = Vec::new();
    body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]);
    body.extend_from_slice(&110i32.to_be_bytes());
    for _ in 0..110 {
        body.extend_from_slice(&[0, 1, b't']);
        body.extend_from_slice(&i32::try_from(partitions_count).unwrap().to_be_bytes());
        body.resize(body.len() + partitions_count * 16, 0);
    }
    let result = decode_body(ApiKey::Fetch, 0, &Bytes::from(body));
    assert_eq!(
        result,
        Err(DecodeError::CountTooLarge {
            count: 110 + 100 * partitions_count,
            count_max: crate::limits::ELEMENTS_PER_REQUEST_MAX
        })
    );
}

#[test]
fn fetch_tags_of_later_versions_are_dropped() {
    // Fetch v12 body: replica, wait, min, max, isolation, session, epoch, no topics, no forgotten
    // topics, rack "", then top-level tags {1: "x"} (replica_state, a v15+ field).
    let mut body = vec![0xff, 0xff, 0xff, 0xff];
    body.extend_from_slice(&[0; 12]);
    body.push(0);
    body.extend_from_slice(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    body.extend_from_slice(&[1, 1, 1]);
    body.extend_from_slice(&[1, 1, 1, b'x']);
    let Ok(Request::Fetch(fetch)) = decode_body(ApiKey::Fetch, 12, &Bytes::from(body)) else {
        panic!()
    };
    assert!(fetch.unknown_tagged_fields.is_empty());
}

#[test]
fn tags_above_i32_max_are_skipped() {
    // ApiVersions v3: two empty compact strings, then one tag 2^31 with no data. Kafka keeps it as
    // an unknown field (a negative int); no schema can define it, so it is skipped.
    let body = Bytes::from_static(&[1, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x08, 0]);
    assert_eq!(
        decode_body(ApiKey::ApiVersions, 3, &body),
        Ok(Request::ApiVersions(ApiVersionsRequest::default()))
    );
}

#[test]
fn librdkafka_2_16_metadata_v12_with_trailing_bytes_is_answered() {
    // confluent-kafka 2.16.1 `list_topics()`: the second of two pipelined Metadata v12 frames
    // (after the size prefix). Header v2: key 3, version 12, correlation 3, client "rdkafka", no
    // tags; body: null topics (all), no auto-creation, no authorized operations, no tags; then 3
    // bytes past the schema, which Kafka never reads.
    let frame = Bytes::from_static(&[
        0x00, 0x03, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x03, 0x00, 0x07, b'r', b'd', b'k', b'a', b'f',
        b'k', b'a', 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
    ]);
    let (header, request) = decode_request(&frame).expect("Kafka answers this frame");
    assert_eq!(header.request_api_key, ApiKey::Metadata as i16);
    assert_eq!(header.request_api_version, 12);
    assert_eq!(header.correlation_id, 3);
    assert_eq!(header.client_id.as_deref(), Some("rdkafka"));
    assert_eq!(
        request,
        Request::Metadata(
            MetadataRequest::default()
                .with_topics(None)
                .with_allow_auto_topic_creation(false)
        )
    );
    let (_, again, rest) = decode_request_with_rest(&frame).expect("the same frame");
    assert_eq!((again, rest), (request, 3), "the 3 bytes past the schema");
}

#[test]
fn tagged_fields_in_any_order_and_repeated_are_read_as_kafka_reads_them() {
    // ApiVersions v3 body, then tags 12, 11, 12 (out of order, 12 repeated): the last value wins.
    let body = Bytes::from_static(&[1, 1, 3, 12, 1, b'a', 11, 1, b'b', 12, 2, b'c', b'd']);
    let Ok(Request::ApiVersions(request)) = decode_body(ApiKey::ApiVersions, 3, &body) else {
        panic!()
    };
    assert_eq!(
        request.unknown_tagged_fields,
        BTreeMap::from([
            (11, Bytes::from_static(b"b")),
            (12, Bytes::from_static(b"cd"))
        ])
    );
    // Fetch v12's known top-level tag (cluster_id, 0) sent twice, after an unknown one.
    let mut body = vec![0xff, 0xff, 0xff, 0xff];
    body.extend_from_slice(&[0; 12]);
    body.push(0);
    body.extend_from_slice(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    body.extend_from_slice(&[1, 1, 1]);
    body.extend_from_slice(&[3, 20, 0, 0, 2, 2, b'x', 0, 2, 2, b'y']);
    let Ok(Request::Fetch(fetch)) = decode_body(ApiKey::Fetch, 12, &Bytes::from(body)) else {
        panic!()
    };
    assert_eq!(fetch.cluster_id.as_deref(), Some("y"));
    assert_eq!(
        fetch.unknown_tagged_fields,
        BTreeMap::from([(20, Bytes::new())])
    );
}

#[test]
fn tagged_field_bounds_still_hold() {
    // More fields than TAGGED_FIELDS_MAX, each backed by bytes.
    let count = crate::limits::TAGGED_FIELDS_MAX + 1;
    let mut body = vec![1, 1, u8::try_from(count).unwrap()];
    for tag in 0..count {
        body.extend_from_slice(&[10 + u8::try_from(tag).unwrap(), 0]);
    }
    assert!(matches!(
        decode_body(ApiKey::ApiVersions, 3, &Bytes::from(body)),
        Err(DecodeError::CountTooLarge { .. })
    ));
    // A field whose size runs past the frame.
    let body = Bytes::from_static(&[1, 1, 1, 11, 0x7f, b'a']);
    assert!(matches!(
        decode_body(ApiKey::ApiVersions, 3, &body),
        Err(DecodeError::Truncated { .. })
    ));
}

/// The top-level unknown tagged fields of any request (`None` for SaslHandshake, never flexible).
fn top_level_tags(request: &mut Request) -> Option<&mut TaggedFields> {
    Some(match request {
        Request::Produce(m) => &mut m.unknown_tagged_fields,
        Request::Fetch(m) => {
            // The one known top-level tag; cleared so that the section is only unknown tags.
            m.cluster_id = None;
            &mut m.unknown_tagged_fields
        }
        Request::ListOffsets(m) => &mut m.unknown_tagged_fields,
        Request::Metadata(m) => &mut m.unknown_tagged_fields,
        Request::OffsetCommit(m) => &mut m.unknown_tagged_fields,
        Request::OffsetFetch(m) => &mut m.unknown_tagged_fields,
        Request::FindCoordinator(m) => &mut m.unknown_tagged_fields,
        Request::JoinGroup(m) => &mut m.unknown_tagged_fields,
        Request::Heartbeat(m) => &mut m.unknown_tagged_fields,
        Request::LeaveGroup(m) => &mut m.unknown_tagged_fields,
        Request::SyncGroup(m) => &mut m.unknown_tagged_fields,
        Request::DescribeGroups(m) => &mut m.unknown_tagged_fields,
        Request::ListGroups(m) => &mut m.unknown_tagged_fields,
        Request::SaslHandshake(_) => return None,
        Request::ApiVersions(m) => &mut m.unknown_tagged_fields,
        Request::CreateTopics(m) => &mut m.unknown_tagged_fields,
        Request::DeleteTopics(m) => &mut m.unknown_tagged_fields,
        Request::InitProducerId(m) => &mut m.unknown_tagged_fields,
        Request::OffsetForLeaderEpoch(m) => &mut m.unknown_tagged_fields,
        Request::DescribeConfigs(m) => &mut m.unknown_tagged_fields,
        Request::SaslAuthenticate(m) => &mut m.unknown_tagged_fields,
        Request::AlterConfigs(m) => &mut m.unknown_tagged_fields,
        Request::CreatePartitions(m) => &mut m.unknown_tagged_fields,
        Request::IncrementalAlterConfigs(m) => &mut m.unknown_tagged_fields,
        Request::DeleteRecords(m) => &mut m.unknown_tagged_fields,
        Request::DescribeLogDirs(m) => &mut m.unknown_tagged_fields,
        Request::DeleteGroups(m) => &mut m.unknown_tagged_fields,
        Request::ListPartitionReassignments(m) => &mut m.unknown_tagged_fields,
        Request::ElectLeaders(m) => &mut m.unknown_tagged_fields,
        Request::AlterPartitionReassignments(m) => &mut m.unknown_tagged_fields,
        Request::DescribeAcls(m) => &mut m.unknown_tagged_fields,
        Request::CreateAcls(m) => &mut m.unknown_tagged_fields,
        Request::DeleteAcls(m) => &mut m.unknown_tagged_fields,
        Request::DescribeUserScramCredentials(m) => &mut m.unknown_tagged_fields,
        Request::AlterUserScramCredentials(m) => &mut m.unknown_tagged_fields,
        Request::DescribeCluster(m) => &mut m.base.unknown_tagged_fields,
        Request::DescribeClientQuotas(m) => &mut m.unknown_tagged_fields,
        Request::AlterClientQuotas(m) => &mut m.unknown_tagged_fields,
        Request::AddPartitionsToTxn(m) => &mut m.unknown_tagged_fields,
        Request::AddOffsetsToTxn(m) => &mut m.unknown_tagged_fields,
        Request::EndTxn(m) => &mut m.unknown_tagged_fields,
        Request::WriteTxnMarkers(m) => &mut m.unknown_tagged_fields,
        Request::TxnOffsetCommit(m) => &mut m.unknown_tagged_fields,
        Request::DescribeProducers(m) => &mut m.unknown_tagged_fields,
        Request::DescribeTransactions(m) => &mut m.unknown_tagged_fields,
        Request::ListTransactions(m) => &mut m.base.unknown_tagged_fields,
        Request::ConsumerGroupHeartbeat(m) => &mut m.base.unknown_tagged_fields,
        Request::ConsumerGroupDescribe(m) => &mut m.unknown_tagged_fields,
        // Never flexible: no tagged section.
        Request::OffsetDelete(_) => return None,
    })
}

fn flexible_versions() -> Vec<(ApiKey, i16)> {
    all_versions()
        .filter(|(api_key, version)| flexible(*api_key, *version))
        .collect()
}

proptest::proptest! {
    /// In every flexible version of every API, any top-level section of unknown tags (any order,
    /// repeats, tags past `i32::MAX`) is skipped: the request decodes to the same message, with
    /// the tags Kafka would keep (last value per tag).
    #[test]
    fn unknown_tags_are_skipped_in_every_flexible_version(
        index in 0usize..1000,
        seed in 0u64..64,
        fields in proptest::collection::vec(
            (proptest::prop_oneof![10u32..40, 0x7fff_fff0u32..=u32::MAX],
             proptest::collection::vec(proptest::num::u8::ANY, 0..6)),
            0..8,
        ),
    ) {
        let versions = flexible_versions();
        let (api_key, version) = versions[index % versions.len()];
        let Ok(mut sample) = decode_from(&mut SampleSource::new(seed), api_key, version) else {
            return Ok(());
        };
        let Some(tags) = top_level_tags(&mut sample) else {
            return Ok(());
        };
        tags.clear();
        let body = sample.encode_body(version).unwrap().to_vec();
        // A message's own tagged-field section is its last field: an empty one is the count 0.
        proptest::prop_assert_eq!(body.last(), Some(&0));
        let mut sent = body[..body.len() - 1].to_vec();
        crate::codec::put_unsigned_varint(&mut sent, u32::try_from(fields.len()).unwrap());
        let mut kept = TaggedFields::new();
        for (tag, data) in &fields {
            crate::codec::put_unsigned_varint(&mut sent, *tag);
            crate::codec::put_unsigned_varint(&mut sent, u32::try_from(data.len()).unwrap());
            sent.extend_from_slice(data);
            if let Ok(tag) = i32::try_from(*tag) {
                kept.insert(tag, Bytes::from(data.clone()));
            }
        }
        let decoded = decode_pending_body(api_key, version, &Bytes::from(sent));
        if let Some(tags) = top_level_tags(&mut sample) {
            *tags = kept;
        }
        proptest::prop_assert_eq!(decoded, Ok(sample));
    }
}

#[test]
fn metadata_topic_names_are_nullable_only_from_v10() {
    let body = Bytes::from_static(&[0, 0, 0, 1, 0xff, 0xff]);
    assert_eq!(
        decode_body(ApiKey::Metadata, 1, &body),
        Err(DecodeError::UnexpectedNull)
    );
    let mut body = vec![2u8];
    body.extend_from_slice(&[7; 16]);
    // null name, no topic tags, allow auto creation, two authorized-operations flags, no tags
    body.extend_from_slice(&[0, 0, 1, 0, 0, 0]);
    let Ok(Request::Metadata(metadata)) = decode_body(ApiKey::Metadata, 10, &Bytes::from(body))
    else {
        panic!()
    };
    let topics = metadata.topics.unwrap();
    assert_eq!(topics[0].name, None);
    assert_eq!(topics[0].topic_id, Uuid::from_bytes([7; 16]));
}

#[test]
fn admin_request_bytes_follow_kafkas_schemas() {
    // OffsetsForLeaderEpoch v3 (OffsetForLeaderEpochRequest.json): replica_id −1, topics [name
    // "t", partitions [2: current epoch 7, asked epoch 5]].
    let body = Bytes::from_static(&[
        0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 7, 0, 0,
        0, 5,
    ]);
    let Ok(Request::OffsetForLeaderEpoch(request)) =
        decode_body(ApiKey::OffsetForLeaderEpoch, 3, &body)
    else {
        panic!("OffsetsForLeaderEpoch v3 decodes");
    };
    assert_eq!(request.replica_id.0, -1);
    let partition = &request.topics[0].partitions[0];
    assert_eq!(
        (
            partition.partition,
            partition.current_leader_epoch,
            partition.leader_epoch
        ),
        (2, 7, 5)
    );
    // v0 has neither the replica id nor the current epoch.
    let body = Bytes::from_static(&[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 5]);
    let Ok(Request::OffsetForLeaderEpoch(request)) =
        decode_body(ApiKey::OffsetForLeaderEpoch, 0, &body)
    else {
        panic!("OffsetsForLeaderEpoch v0 decodes");
    };
    assert_eq!(request.replica_id.0, -2);
    assert_eq!(request.topics[0].partitions[0].current_leader_epoch, -1);

    // DeleteRecords v0 (DeleteRecordsRequest.json): topics [name "t", partitions [0 @ 5]],
    // timeout 1000.
    let body = Bytes::from_static(&[
        0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0x03, 0xe8,
    ]);
    let Ok(Request::DeleteRecords(request)) = decode_body(ApiKey::DeleteRecords, 0, &body) else {
        panic!()
    };
    assert_eq!(request.topics[0].name.0.as_str(), "t");
    assert_eq!(request.topics[0].partitions[0].offset, 5);
    assert_eq!(request.timeout_ms, 1000);
    // OffsetDelete v0: group "g", topics [name "t", partitions [3]].
    let body = Bytes::from_static(&[0, 1, b'g', 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 3]);
    let Ok(Request::OffsetDelete(request)) = decode_body(ApiKey::OffsetDelete, 0, &body) else {
        panic!()
    };
    assert_eq!(request.group_id.0.as_str(), "g");
    assert_eq!(request.topics[0].partitions[0].partition_index, 3);
    // DescribeLogDirs v0 and v2: null topics (every partition).
    assert_eq!(
        decode_body(
            ApiKey::DescribeLogDirs,
            0,
            &Bytes::from_static(&[0xff, 0xff, 0xff, 0xff])
        ),
        Ok(Request::DescribeLogDirs(
            DescribeLogDirsRequest::default().with_topics(None)
        ))
    );
    assert_eq!(
        decode_body(ApiKey::DescribeLogDirs, 2, &Bytes::from_static(&[0, 0])),
        Ok(Request::DescribeLogDirs(
            DescribeLogDirsRequest::default().with_topics(None)
        ))
    );
    // ListPartitionReassignments v0 (flexible): timeout 30000, null topics, no tags.
    assert_eq!(
        decode_body(
            ApiKey::ListPartitionReassignments,
            0,
            &Bytes::from_static(&[0, 0, 0x75, 0x30, 0, 0])
        ),
        Ok(Request::ListPartitionReassignments(
            ListPartitionReassignmentsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(None)
        ))
    );
    // DeleteGroups v2 (flexible): ["g"], no tags.
    let Ok(Request::DeleteGroups(request)) = decode_body(
        ApiKey::DeleteGroups,
        2,
        &Bytes::from_static(&[2, 2, b'g', 0]),
    ) else {
        panic!()
    };
    assert_eq!(request.groups_names[0].0.as_str(), "g");
}

#[test]
fn alter_partition_reassignments_bytes_follow_kafkas_schema() {
    // v0 (AlterPartitionReassignmentsRequest.json, flexible): timeout 30000; topics [name "t",
    // partitions [0 → replicas [3, 2]], [1 → null replicas: a cancellation]], no tags anywhere.
    let body = Bytes::from_static(&[
        0, 0, 0x75, 0x30, // timeout_ms
        2, 2, b't', // one topic, "t"
        3,    // two partitions
        0, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, // 0: [3, 2]
        0, 0, 0, 1, 0, 0, // 1: null
        0, 0,
    ]);
    let Ok(Request::AlterPartitionReassignments(request)) =
        decode_body(ApiKey::AlterPartitionReassignments, 0, &body)
    else {
        panic!("AlterPartitionReassignments v0 decodes");
    };
    assert_eq!(request.timeout_ms, 30_000);
    let topic = &request.topics[0];
    assert_eq!(topic.name.0.as_str(), "t");
    let replicas: Vec<Option<Vec<i32>>> = topic
        .partitions
        .iter()
        .map(|p| {
            p.replicas
                .as_ref()
                .map(|r| r.iter().map(|id| id.0).collect())
        })
        .collect();
    assert_eq!(replicas, vec![Some(vec![3, 2]), None]);
    assert_eq!(topic.partitions[1].partition_index, 1);
}

#[test]
fn elect_leaders_bytes_follow_kafkas_schema() {
    // v0 (ElectLeadersRequest.json): no election type; topic_partitions [name "t", [0, 2]],
    // timeout 1000. The election type reads as PREFERRED (0).
    let body = Bytes::from_static(&[
        0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0x03, 0xe8,
    ]);
    let Ok(Request::ElectLeaders(request)) = decode_body(ApiKey::ElectLeaders, 0, &body) else {
        panic!("ElectLeaders v0 decodes");
    };
    assert_eq!(request.election_type, 0);
    let topics = request.topic_partitions.unwrap();
    assert_eq!(topics[0].topic.0.as_str(), "t");
    assert_eq!(topics[0].partitions, vec![0, 2]);
    assert_eq!(request.timeout_ms, 1000);
    // v1: election type 1 (UNCLEAN) first, then null topic_partitions (every partition).
    let body = Bytes::from_static(&[1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x75, 0x30]);
    assert_eq!(
        decode_body(ApiKey::ElectLeaders, 1, &body),
        Ok(Request::ElectLeaders(
            ElectLeadersRequest::default()
                .with_election_type(1)
                .with_topic_partitions(None)
                .with_timeout_ms(30_000)
        ))
    );
    // v2 (flexible): type 0, compact [name "t", [3]] with no tags, timeout 5, no tags; and null.
    let body = Bytes::from_static(&[0, 2, 2, b't', 2, 0, 0, 0, 3, 0, 0, 0, 0, 5, 0]);
    let Ok(Request::ElectLeaders(request)) = decode_body(ApiKey::ElectLeaders, 2, &body) else {
        panic!("ElectLeaders v2 decodes");
    };
    assert_eq!(request.topic_partitions.unwrap()[0].partitions, vec![3]);
    assert_eq!(request.timeout_ms, 5);
    let body = Bytes::from_static(&[0, 0, 0, 0, 0, 5, 0]);
    let Ok(Request::ElectLeaders(request)) = decode_body(ApiKey::ElectLeaders, 2, &body) else {
        panic!("ElectLeaders v2 with null topics decodes");
    };
    assert_eq!(request.topic_partitions, None);
    // A partition count above the per-topic bound is refused before anything is allocated.
    let body = Bytes::from_static(&[0, 0, 0, 1, 0, 1, b't', 0x7f, 0xff, 0xff, 0xff]);
    assert!(decode_body(ApiKey::ElectLeaders, 0, &body).is_err());
}

/// A frame of `api_key` at `version` with `body`, as a client sends it (header then body).
fn frame_of(api_key: ApiKey, version: i16, body: &[u8]) -> Bytes {
    use kafka_protocol::messages::RequestHeader;
    let row = crate::api::decodable(api_key).unwrap();
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(5);
    let mut frame = bytes::BytesMut::new();
    header
        .encode(&mut frame, row.request_header_version(version))
        .unwrap();
    frame.extend_from_slice(body);
    frame.freeze()
}

#[test]
fn pending_apis_and_versions_are_decoded_only_by_the_pending_entry_point() {
    // Each pending row's newest version (none while nothing is staged): the body decodes through
    // `decode_pending_body`, while a whole frame is refused by `decode_request` (the broker's
    // path) exactly as an unsupported version or an unknown API, and `decode_body` refuses it too.
    for row in PENDING_APIS {
        let version = row.version_max;
        let sample = (0..)
            .find_map(|seed| decode_from(&mut SampleSource::new(seed), row.api_key, version).ok())
            .unwrap();
        let body = sample.encode_body(version).unwrap().freeze();
        assert_eq!(
            decode_pending_body(row.api_key, version, &body),
            Ok(sample.clone())
        );
        assert!(decode_body(row.api_key, version, &body).is_err());
        let refused = decode_request(&frame_of(row.api_key, version, &body)).unwrap_err();
        let expected = if crate::api::supported(row.api_key).is_some() {
            RequestError::UnsupportedVersion {
                api_key: row.api_key as i16,
                api_version: version,
                correlation_id: 5,
            }
        } else {
            RequestError::UnknownApiKey {
                api_key: row.api_key as i16,
                api_version: version,
                correlation_id: 5,
            }
        };
        assert_eq!(refused, expected, "{:?}", row.api_key);
    }
}

#[test]
fn the_kip_848_versions_are_served_and_the_next_ones_refused() {
    // Switched on for issue 40: ConsumerGroupHeartbeat and ConsumerGroupDescribe 0-1, and
    // OffsetCommit / OffsetFetch v9 (the member epoch). A sample of each newest version decodes
    // through the broker's entry point; one version past each (Kafka 4.1.1's v10 of the offset
    // APIs, topic ids) is refused as unsupported before its body is looked at.
    for (api_key, served_max) in [
        (ApiKey::ConsumerGroupHeartbeat, 1),
        (ApiKey::ConsumerGroupDescribe, 1),
        (ApiKey::OffsetCommit, 9),
        (ApiKey::OffsetFetch, 9),
    ] {
        let row = crate::api::supported(api_key).unwrap();
        assert_eq!((row.version_min, row.version_max), (0, served_max));
        let sample = (0..)
            .find_map(|seed| decode_from(&mut SampleSource::new(seed), api_key, served_max).ok())
            .unwrap();
        let body = sample.encode_body(served_max).unwrap().freeze();
        let (_, decoded) = decode_request(&frame_of(api_key, served_max, &body)).unwrap();
        assert_eq!(decoded, sample, "{api_key:?}");
        let past = served_max + 1;
        assert_eq!(
            decode_request(&frame_of(api_key, past, &[])).unwrap_err(),
            RequestError::UnsupportedVersion {
                api_key: api_key as i16,
                api_version: past,
                correlation_id: 5,
            }
        );
    }
}

#[test]
fn write_txn_markers_v0_is_refused_as_kafka_4_refuses_it() {
    // Kafka 4.0 removed v0 (WriteTxnMarkersRequest.json: "validVersions": "1").
    assert!(decode_pending_body(ApiKey::WriteTxnMarkers, 0, &Bytes::from_static(&[0; 4])).is_err());
}

/// Kafka 4.1.1's bytes (`OffsetCommitRequestData` / `OffsetFetchRequestData` of
/// kafka-clients-4.1.1.jar, `MessageUtil.toByteBufferAccessor(data, version)`) at v8 and v9, the
/// versions before and at KIP-848's member epoch: OffsetCommit's are equal, OffsetFetch v9 adds
/// each group's member id and epoch (-1, the default, for a group without them).
#[test]
fn offset_commit_and_fetch_v9_are_kafkas_bytes() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopics,
    };
    use kafka_protocol::messages::{GroupId, TopicName};

    fn hex(text: &str) -> Bytes {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
            .into()
    }
    fn s(text: &'static str) -> StrBytes {
        StrBytes::from_static_str(text)
    }
    fn check(request: Request, version: i16, kafka: &str) {
        let api_key = request.api_key();
        assert_eq!(
            request.encode_body(version).unwrap().as_ref(),
            hex(kafka).as_ref()
        );
        assert_eq!(decode_body(api_key, version, &hex(kafka)), Ok(request));
    }

    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("grp")))
        .with_generation_id_or_member_epoch(5)
        .with_member_id(s("mem-1"))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(2)
                .with_committed_offset(100)
                .with_committed_leader_epoch(3)
                .with_committed_metadata(Some(s("")))])]);
    for version in 8..=9 {
        check(
            Request::OffsetCommit(commit.clone()),
            version,
            "0467727000000005066d656d2d3100020274020000000200000000000000640000000301000000",
        );
    }
    let fetch = |member: Option<(&'static str, i32)>| {
        let mut group = OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("grp")))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(TopicName(s("t")))
                .with_partition_indexes(vec![0, 2])]));
        if let Some((id, epoch)) = member {
            group = group.with_member_id(Some(s(id))).with_member_epoch(epoch);
        }
        let all = OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g2")))
            .with_topics(None);
        Request::OffsetFetch(
            OffsetFetchRequest::default()
                .with_groups(vec![group, all])
                .with_require_stable(true),
        )
    };
    check(
        fetch(None),
        8,
        "0304677270020274030000000000000002000003673200000100",
    );
    check(
        fetch(Some(("mem-1", 5))),
        9,
        "0304677270066d656d2d3100000005020274030000000000000002000003673200ffffffff00000100",
    );
}
