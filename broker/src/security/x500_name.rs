//! A certificate subject written as Kafka names SSL users: what the JDK's
//! `X500Principal.getName(X500Principal.RFC2253)` returns, character for character.
//!
//! The JDK's rules (sun.security.x509 `AVA.toRFC2253String`, checked against OpenJDK 17):
//! - RDNs last first, joined by `,`; the attributes of a multi-valued RDN joined by `+`, in the
//!   order the certificate encodes them;
//! - a keyword only for CN, C, L, ST, O, OU, STREET, DC and UID; every other type (T,
//!   SERIALNUMBER, emailAddress, SURNAME, ...) as its dotted OID;
//! - the value as a string when the type has a keyword and the value is a PrintableString,
//!   T61String, IA5String, GeneralString, BMPString or UTF8String; otherwise `#` and the
//!   lowercase hex of the value's DER encoding;
//! - a string decoded as the JDK's `AVA.toRFC2253String` decodes it: UTF8String as UTF-8, every
//!   other string type (PrintableString, T61String, IA5String, GeneralString, and BMPString too)
//!   byte by byte as US-ASCII, each byte above 0x7F becoming U+FFFD (a Latin-1 `é` in a
//!   T61String is U+FFFD; the BMPString `Ω` (03 A9) is U+0003 U+FFFD; a BMPString's zero bytes
//!   are NULs, written `\00`): what OpenJDK 17.0.15 gives, seen by
//!   tests/clients/test_ssl_principal.py;
//! - in a string, each of `,=+<>#;"\` escaped with `\`, NUL written `\00`, and leading or
//!   trailing spaces and carriage returns escaped with `\`; everything else as it is.
//!
//! So `CN=a,O=b` (two RDNs) and a CN whose value is `a,O=b` (`CN=a\,O\=b`) never give the same
//! name. Pure: it formats data handed to it and must never parse certificates or read files.

/// One attribute of a subject, as the certificate encodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// The attribute type, dotted (`2.5.4.3`).
    pub oid: String,
    /// The value's universal tag number (12 for UTF8String).
    pub tag: u32,
    /// The value's content octets.
    pub content: Vec<u8>,
    /// The value's whole DER encoding (tag, length and content), for the `#hex` form.
    pub der: Vec<u8>,
}

const TAG_UTF8_STRING: u32 = 12;
const TAG_PRINTABLE_STRING: u32 = 19;
const TAG_T61_STRING: u32 = 20;
const TAG_IA5_STRING: u32 = 22;
const TAG_GENERAL_STRING: u32 = 27;
const TAG_BMP_STRING: u32 = 30;

/// The keywords the JDK writes in RFC 2253 names, by OID; any other type is written as its OID.
const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.9", "STREET"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("0.9.2342.19200300.100.1.1", "UID"),
    ("0.9.2342.19200300.100.1.25", "DC"),
];

/// Characters the JDK escapes with a backslash wherever they stand in a value.
const ESCAPED: &[char] = &[',', '=', '+', '<', '>', '#', ';', '"', '\\'];

/// The RFC 2253 name of a subject whose RDNs are `rdns`, in certificate order (first RDN first).
pub fn rfc2253_name(rdns: &[Vec<Attribute>]) -> String {
    let mut name = String::new();
    for (index, rdn) in rdns.iter().rev().enumerate() {
        if index > 0 {
            name.push(',');
        }
        for (position, attribute) in rdn.iter().enumerate() {
            if position > 0 {
                name.push('+');
            }
            push_attribute(&mut name, attribute);
        }
    }
    name
}

fn push_attribute(name: &mut String, attribute: &Attribute) {
    let keyword = KEYWORDS
        .iter()
        .find(|(oid, _)| *oid == attribute.oid)
        .map(|(_, keyword)| *keyword);
    name.push_str(keyword.unwrap_or(&attribute.oid));
    name.push('=');
    match keyword.and(decode_string(attribute.tag, &attribute.content)) {
        Some(value) => push_escaped(name, &value),
        None => {
            name.push('#');
            for byte in &attribute.der {
                name.push_str(&format!("{byte:02x}"));
            }
        }
    }
}

/// The value of a string type the JDK writes as text, decoded as `AVA.toRFC2253String` decodes
/// it (see the module doc; malformed input becomes U+FFFD); `None` for any other type.
fn decode_string(tag: u32, content: &[u8]) -> Option<String> {
    match tag {
        TAG_UTF8_STRING => Some(String::from_utf8_lossy(content).into_owned()),
        TAG_PRINTABLE_STRING | TAG_T61_STRING | TAG_IA5_STRING | TAG_GENERAL_STRING
        | TAG_BMP_STRING => Some(
            content
                .iter()
                .map(|&byte| {
                    if byte.is_ascii() {
                        char::from(byte)
                    } else {
                        char::REPLACEMENT_CHARACTER
                    }
                })
                .collect(),
        ),
        _ => None,
    }
}

fn push_escaped(name: &mut String, value: &str) {
    let mut escaped: Vec<char> = Vec::with_capacity(value.len());
    for c in value.chars() {
        if ESCAPED.contains(&c) {
            escaped.push('\\');
            escaped.push(c);
        } else if c == '\0' {
            escaped.extend(['\\', '0', '0']);
        } else {
            escaped.push(c);
        }
    }
    // Leading and trailing spaces (and carriage returns) would be lost to a reader that trims.
    let blank = |c: &char| *c == ' ' || *c == '\r';
    let lead = escaped.iter().take_while(|c| blank(c)).count();
    let trail = escaped.len() - escaped.iter().rev().take_while(|c| blank(c)).count();
    for (index, c) in escaped.into_iter().enumerate() {
        if index < lead || index >= trail {
            name.push('\\');
        }
        name.push(c);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn utf8(oid: &str, value: &str) -> Attribute {
        let content = value.as_bytes().to_vec();
        let mut der = vec![TAG_UTF8_STRING as u8, content.len() as u8];
        der.extend_from_slice(&content);
        Attribute {
            oid: oid.to_owned(),
            tag: TAG_UTF8_STRING,
            content,
            der,
        }
    }

    const CN: &str = "2.5.4.3";
    const O: &str = "2.5.4.10";

    #[test]
    fn rdns_last_first_and_multi_valued_rdns_joined_by_plus() {
        let rdns = vec![
            vec![utf8("2.5.4.6", "US")],
            vec![utf8(O, "b"), utf8("2.5.4.11", "c")],
            vec![utf8(CN, "a")],
        ];
        assert_eq!(rfc2253_name(&rdns), "CN=a,O=b+OU=c,C=US");
    }

    #[test]
    fn special_characters_are_escaped_like_the_jdk() {
        // Each expected string is what OpenJDK 17 prints for the same value.
        let cases = [
            ("a,O=b", r"a\,O\=b"),
            ("a#b", r"a\#b"),
            ("#lead", r"\#lead"),
            (r#"a;b<c>d"e\f=g+h"#, r#"a\;b\<c\>d\"e\\f\=g\+h"#),
            (" lead and trail ", r"\ lead and trail\ "),
            ("a  b", "a  b"),
            ("a\0b", r"a\00b"),
            ("x\r", "x\\\r"),
            ("\rx", "\\\rx"),
            ("tab\there", "tab\there"),
            ("é ü", "é ü"),
            ("", ""),
        ];
        for (value, written) in cases {
            assert_eq!(
                rfc2253_name(&[vec![utf8(CN, value)]]),
                format!("CN={written}"),
                "{value:?}"
            );
        }
    }

    #[test]
    fn bytes_above_ascii_in_the_ascii_string_types_are_replacement_characters() {
        // What OpenJDK 17.0.15 names a T61String CN holding Latin-1 `é` (0xE9), and a BMPString
        // whose bytes are not ASCII.
        for tag in [
            TAG_T61_STRING,
            TAG_PRINTABLE_STRING,
            TAG_IA5_STRING,
            TAG_BMP_STRING,
        ] {
            let attribute = Attribute {
                oid: CN.to_owned(),
                tag,
                content: vec![b'x', 0xe9, 0xc3, 0xa9],
                der: vec![tag as u8, 4, b'x', 0xe9, 0xc3, 0xa9],
            };
            assert_eq!(
                rfc2253_name(&[vec![attribute]]),
                "CN=x\u{fffd}\u{fffd}\u{fffd}"
            );
        }
        let omega = Attribute {
            oid: CN.to_owned(),
            tag: TAG_BMP_STRING,
            content: vec![0x03, 0xa9, 0x00, b'm'],
            der: vec![TAG_BMP_STRING as u8, 4, 0x03, 0xa9, 0x00, b'm'],
        };
        assert_eq!(rfc2253_name(&[vec![omega]]), "CN=\u{3}\u{fffd}\\00m");
    }

    #[test]
    fn types_without_an_rfc2253_keyword_and_non_string_values_are_hex() {
        let email = Attribute {
            oid: "1.2.840.113549.1.9.1".to_owned(),
            tag: TAG_IA5_STRING,
            content: b"a@b.c".to_vec(),
            der: b"\x16\x05a@b.c".to_vec(),
        };
        assert_eq!(
            rfc2253_name(&[vec![email]]),
            "1.2.840.113549.1.9.1=#16056140622e63"
        );
        let octets = Attribute {
            oid: CN.to_owned(),
            tag: 4,
            content: b"hi".to_vec(),
            der: b"\x04\x02hi".to_vec(),
        };
        assert_eq!(rfc2253_name(&[vec![octets]]), "CN=#04026869");
    }

    /// Reads a name this module wrote back into (type, value) RDNs: the inverse the property
    /// below checks. It knows only the escapes the JDK writes (`\` + char, `\00`).
    fn parse(name: &str) -> Vec<Vec<(String, String)>> {
        let mut rdns = vec![vec![]];
        let mut current = String::new();
        let mut chars = name.chars().peekable();
        let finish = |text: &mut String, rdn: &mut Vec<(String, String)>| {
            let (kind, value) = text.split_once('\u{1}').expect("type=value");
            rdn.push((kind.to_owned(), value.to_owned()));
            text.clear();
        };
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    let next = chars.next().expect("escape");
                    if next == '0' && chars.peek() == Some(&'0') {
                        let _ = chars.next();
                        current.push('\0');
                    } else {
                        current.push(next);
                    }
                }
                '=' if !current.contains('\u{1}') => current.push('\u{1}'),
                '+' => finish(&mut current, rdns.last_mut().expect("rdn")),
                ',' => {
                    finish(&mut current, rdns.last_mut().expect("rdn"));
                    rdns.push(vec![]);
                }
                other => current.push(other),
            }
        }
        finish(&mut current, rdns.last_mut().expect("rdn"));
        rdns.reverse();
        rdns
    }

    proptest! {
        #[test]
        fn names_read_back_to_the_same_subject(
            rdns in proptest::collection::vec(
                proptest::collection::vec(
                    (proptest::sample::select(vec![CN, O, "2.5.4.11", "0.9.2342.19200300.100.1.25"]),
                     "[ -~\r\0é+,=#\\\\\"<>;]{0,12}"),
                    1..3,
                ),
                1..4,
            ),
        ) {
            let attributes: Vec<Vec<Attribute>> = rdns
                .iter()
                .map(|rdn| rdn.iter().map(|(oid, value)| utf8(oid, value)).collect())
                .collect();
            let name = rfc2253_name(&attributes);
            let expected: Vec<Vec<(String, String)>> = attributes
                .iter()
                .map(|rdn| {
                    rdn.iter()
                        .map(|a| {
                            let keyword = KEYWORDS.iter().find(|(oid, _)| *oid == a.oid).unwrap().1;
                            (keyword.to_owned(), String::from_utf8(a.content.clone()).unwrap())
                        })
                        .collect()
                })
                .collect();
            prop_assert_eq!(parse(&name), expected, "{}", name);
        }
    }
}
