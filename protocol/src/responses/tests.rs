//! Response encoding tests: exact bytes of the ApiVersions answers (no default-valued tagged
//! fields), and header versions per API.

use kafka_protocol::messages::{MetadataResponse, ResponseHeader};

use super::*;

/// ApiVersions v3 bytes written by hand from the schema: header v0 (always, for ApiVersions),
/// error code, compact array of {key, min, max, no tags}, throttle, and an empty tag section —
/// no SupportedFeatures/FinalizedFeatures tags, since their values are the defaults.
fn api_versions_v3_by_hand(correlation_id: i32, throttle_time_ms: i32) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&correlation_id.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.push(u8::try_from(SUPPORTED_APIS.len() + 1).unwrap());
    for row in SUPPORTED_APIS {
        body.extend_from_slice(&(row.api_key as i16).to_be_bytes());
        body.extend_from_slice(&row.version_min.to_be_bytes());
        body.extend_from_slice(&row.version_max.to_be_bytes());
        body.push(0);
    }
    body.extend_from_slice(&throttle_time_ms.to_be_bytes());
    body.push(0);
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

#[test]
fn api_versions_v3_has_no_default_valued_tagged_fields() {
    let encoded = encode_response(ApiKey::ApiVersions, 3, 7, &api_versions_response(0)).unwrap();
    assert_eq!(encoded.to_vec(), api_versions_v3_by_hand(7, 0));
}

#[test]
fn api_versions_v0_and_the_unsupported_answer() {
    let encoded = encode_api_versions_unsupported(99).unwrap();
    let mut expected = Vec::new();
    expected.extend_from_slice(&99i32.to_be_bytes());
    expected.extend_from_slice(&35i16.to_be_bytes());
    expected.extend_from_slice(&i32::try_from(SUPPORTED_APIS.len()).unwrap().to_be_bytes());
    for row in SUPPORTED_APIS {
        expected.extend_from_slice(&(row.api_key as i16).to_be_bytes());
        expected.extend_from_slice(&row.version_min.to_be_bytes());
        expected.extend_from_slice(&row.version_max.to_be_bytes());
    }
    let mut frame = (expected.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&expected);
    assert_eq!(encoded.to_vec(), frame);
}

#[test]
fn flexible_responses_get_header_v1() {
    let body = MetadataResponse::default();
    let flexible = encode_response(ApiKey::Metadata, 9, 5, &body).unwrap();
    let classic = encode_response(ApiKey::Metadata, 8, 5, &body).unwrap();
    // Header v1 = correlation id + empty tag section.
    assert_eq!(&flexible[4..9], &[0, 0, 0, 5, 0]);
    assert_eq!(&classic[4..8], &[0, 0, 0, 5]);
    let size = i32::from_be_bytes(flexible[..4].try_into().unwrap());
    assert_eq!(size as usize + 4, flexible.len());
    let _ = ResponseHeader::default();
}

#[test]
fn versions_kafka_protocol_lacks_are_an_error() {
    let body = MetadataResponse::default();
    assert!(matches!(
        encode_response(ApiKey::Metadata, 99, 1, &body),
        Err(EncodeError::Message { .. })
    ));
}

#[test]
fn capped_versions_emulate_an_old_broker() {
    let capped = capped_api_versions(|key| match key {
        ApiKey::Fetch => Some(3),
        ApiKey::Produce => Some(2),
        ApiKey::SaslAuthenticate => Some(-1),
        _ => None,
    });
    let max_of = |key: ApiKey| {
        capped
            .iter()
            .find(|row| row.api_key == key as i16)
            .map(|row| row.max_version)
    };
    assert_eq!(max_of(ApiKey::Fetch), Some(3));
    assert_eq!(max_of(ApiKey::Produce), Some(2));
    assert_eq!(max_of(ApiKey::Metadata), Some(12));
    assert_eq!(max_of(ApiKey::SaslAuthenticate), None);
    assert_eq!(supported_api_versions().len(), SUPPORTED_APIS.len());
}
