//! `ssl.principal.mapping.rules`: how the RFC 2253 name of a client certificate's subject (see
//! [`crate::security::x500_name`]) becomes the user name of its principal, with the semantics of
//! Kafka's `SslPrincipalMapper` (Kafka 2.2+, KIP-371), parsed as Kafka parses it:
//!
//! - the value is split into rules at commas that follow a whole rule (`\s*(rule)\s*(,\s*|$)`,
//!   where a rule is `DEFAULT`, `RULE:pattern/replacement/` with an optional `L` or `U`, or
//!   anything up to the next comma); a `/` or `\` inside a pattern or replacement is written
//!   `\/`, `\\`; empty rules are ignored; a rule with text left over is an error;
//! - rules are tried in order: `DEFAULT` gives the name unchanged; `RULE:p/r/` applies when `p`
//!   matches the whole name, and gives the name with every match of `p` replaced by `r`
//!   (Java's `String.replaceAll`: `$n` and `${name}` are groups, `\x` is `x`; a `$n` beyond the
//!   pattern's groups is taken as fewer digits, or literally, as Kafka's
//!   `escapeLiteralBackReferences` does), lower-cased with `L`, upper-cased with `U`;
//! - a name no rule applies to has no principal: the connection is closed, as Kafka fails it.
//!
//! Patterns are compiled by the `regex` crate, whose syntax is Java's without look-around and
//! back-references (a pattern using them is a config error, not a rule that never matches).
//! Unlike Java's, its `\w`, `\d`, `\s`, `\b` and `(?i)` know Unicode and its `.` matches `\r`:
//! names that differ only there are ASCII in practice. A replacement Java would refuse when the
//! rule first applies (a group that does not exist, a `\` at the end) is refused at start.
//!
//! Pure: it maps strings handed to it; it must never read certificates, files or config keys.

use std::fmt;
use std::sync::OnceLock;

use regex::Regex;

/// Kafka's `RULE_PATTERN`: one rule, with its parts as groups (1 `DEFAULT`; 2 the pattern; 4 the
/// replacement; 6 the case flag; 7 anything else). Java's `\s` is ASCII, as written here.
const RULE_PATTERN: &str = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)";
/// Java's `\s`.
const JAVA_SPACE: &str = r"[ \t\n\x0B\x0C\r]";

/// Why a rules value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// A rule with text after what Kafka's rule syntax reads.
    #[error("invalid rule `{rule}`, unmatched text `{unmatched}` (rules are DEFAULT or RULE:pattern/replacement/ with an optional L or U)")]
    Unmatched {
        /// The rule.
        rule: String,
        /// What is left over.
        unmatched: String,
    },
    /// A pattern the regex engine refuses.
    #[error("invalid pattern in rule `{rule}`: {reason}")]
    Pattern {
        /// The rule.
        rule: String,
        /// What the engine said.
        reason: String,
    },
    /// A replacement Java's `replaceAll` would refuse.
    #[error("invalid replacement in rule `{rule}`: {reason}")]
    Replacement {
        /// The rule.
        rule: String,
        /// What is wrong (Java's words).
        reason: ReplacementError,
    },
}

/// Why Java's `Matcher.appendReplacement` would refuse a replacement, in Java's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplacementError {
    /// A `\` at the end.
    #[error("character to be escaped is missing")]
    EscapedCharacterMissing,
    /// A `$` at the end.
    #[error("Illegal group reference: group index is missing")]
    GroupIndexMissing,
    /// `${}`.
    #[error("named capturing group has 0 length name")]
    EmptyGroupName,
    /// `${name` without its `}`.
    #[error("named capturing group is missing trailing '}}'")]
    GroupNameUnclosed,
    /// `${1name}`.
    #[error("capturing group name {{{0}}} starts with digit character")]
    GroupNameStartsWithDigit(String),
    /// `${name}` where the pattern has no such group.
    #[error("No group with name {{{0}}}")]
    NoGroupNamed(String),
    /// `$` followed by neither a digit nor `{`.
    #[error("Illegal group reference")]
    IllegalGroupReference,
    /// `$n` where the pattern has fewer groups.
    #[error("No group {0}")]
    NoGroup(usize),
}

/// The parsed `ssl.principal.mapping.rules`.
#[derive(Clone)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

#[derive(Clone)]
enum Rule {
    Default,
    Replace(Box<Replace>),
}

#[derive(Clone)]
struct Replace {
    /// The pattern as found by `replaceAll`.
    pattern: Regex,
    /// The pattern anchored at both ends, for Java's `matches()`.
    whole: Regex,
    replacement: Vec<Piece>,
    case: Case,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// A part of a parsed replacement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Group(usize),
}

impl SslPrincipalMapper {
    /// Parses a rules value as Kafka's `SslPrincipalMapper` constructor does.
    pub fn parse(text: &str) -> Result<Self, RuleError> {
        let mut rules = Vec::new();
        for rule in split_rules(text) {
            if let Some(rule) = parse_rule(&rule)? {
                rules.push(rule);
            }
        }
        Ok(Self { rules })
    }

    /// Kafka's default rules, `DEFAULT`: the name unchanged (what `parse("DEFAULT")` gives).
    pub fn default_rules() -> Self {
        Self {
            rules: vec![Rule::Default],
        }
    }

    /// The user name for the RFC 2253 name `distinguished_name`: what the first rule that applies
    /// gives, or `None` when none does.
    pub fn map(&self, distinguished_name: &str) -> Option<String> {
        self.rules
            .iter()
            .find_map(|rule| rule.apply(distinguished_name))
    }
}

impl fmt::Debug for SslPrincipalMapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SslPrincipalMapper({} rules)", self.rules.len())
    }
}

/// Java's `String.trim`: every char up to U+0020 off both ends.
fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ')
}

/// The regex of one of this file's constant patterns, compiled on first use.
fn constant_regex(
    cell: &'static OnceLock<Regex>,
    pattern: impl FnOnce() -> String,
) -> &'static Regex {
    // INVARIANT: the pattern is built from this file's constants only; the unit tests compile
    // each (every rules value parsed goes through all three).
    #[allow(clippy::expect_used)]
    cell.get_or_init(|| Regex::new(&pattern()).expect("a constant pattern compiles"))
}

/// Kafka's `splitRules`: group 1 of each successive match of `RULE_SPLITTER` over the trimmed
/// text, found as Java's `Matcher.find` finds them (after an empty match, one character on).
fn split_rules(text: &str) -> Vec<String> {
    static SPLITTER: OnceLock<Regex> = OnceLock::new();
    // Kafka's rule splitter.
    let splitter = constant_regex(&SPLITTER, || {
        format!("{JAVA_SPACE}*({RULE_PATTERN}){JAVA_SPACE}*(,{JAVA_SPACE}*|$)")
    });
    let text = java_trim(text);
    let mut rules = Vec::new();
    let mut from = 0;
    while from <= text.len() {
        let Some(found) = splitter.captures_at(text, from) else {
            break;
        };
        let whole = found.get_match();
        rules.push(found.get(1).map_or("", |rule| rule.as_str()).to_owned());
        let Some(next) = next_search(text, whole) else {
            break;
        };
        from = next;
    }
    rules
}

/// Where Java's `Matcher.find` looks for the match after `previous`: at its end, or one character
/// on after an empty match; `None` past the end of `text`.
fn next_search(text: &str, previous: regex::Match<'_>) -> Option<usize> {
    if !previous.is_empty() {
        return Some(previous.end());
    }
    text[previous.end()..]
        .chars()
        .next()
        .map(|next| previous.end() + next.len_utf8())
}

/// Kafka's `parseRules` for one rule: `None` for an empty one.
fn parse_rule(rule: &str) -> Result<Option<Rule>, RuleError> {
    static PARSER: OnceLock<Regex> = OnceLock::new();
    // Kafka's rule parser.
    let parser = constant_regex(&PARSER, || format!(r"\A(?:{RULE_PATTERN})"));
    let Some(found) = parser.captures(rule) else {
        return Ok(None);
    };
    let end = found.get(0).map_or(0, |whole| whole.end());
    if end != rule.len() {
        return Err(RuleError::Unmatched {
            rule: rule.to_owned(),
            unmatched: rule[end..].to_owned(),
        });
    }
    if found.get(1).is_some() {
        return Ok(Some(Rule::Default));
    }
    let Some(pattern_text) = found.get(2) else {
        return Ok(None);
    };
    let compile = |text: &str| {
        Regex::new(text).map_err(|error| RuleError::Pattern {
            rule: rule.to_owned(),
            reason: error.to_string(),
        })
    };
    let pattern = compile(pattern_text.as_str())?;
    let whole = compile(&format!(r"\A(?:{})\z", pattern_text.as_str()))?;
    let replacement_text = found.get(4).map_or("", |text| text.as_str());
    let group_count = pattern.captures_len() - 1;
    let escaped = escape_literal_back_references(replacement_text, group_count);
    let replacement =
        parse_replacement(&escaped, &pattern).map_err(|reason| RuleError::Replacement {
            rule: rule.to_owned(),
            reason,
        })?;
    let case = match found.get(6).map(|flag| flag.as_str()) {
        Some("L") => Case::Lower,
        Some("U") => Case::Upper,
        _ => Case::Keep,
    };
    Ok(Some(Rule::Replace(Box::new(Replace {
        pattern,
        whole,
        replacement,
        case,
    }))))
}

/// Kafka's `escapeLiteralBackReferences`, quirks included: each `$n` beyond the pattern's groups
/// (after dropping trailing digits while it is 10 or more) gets a `\` before its `$`, so Java
/// reads it as text; the positions come from the replacement as written, while the backslashes go
/// into the text being changed (so after the first, later ones land one place earlier each).
fn escape_literal_back_references(unescaped: &str, group_count: usize) -> String {
    static BACK_REFERENCE: OnceLock<Regex> = OnceLock::new();
    if group_count == 0 {
        return unescaped.to_owned();
    }
    let back_reference = constant_regex(&BACK_REFERENCE, || r"\$([0-9]+)".to_owned());
    // Java indexes strings by UTF-16 unit; so do these positions.
    let mut value: Vec<u16> = unescaped.encode_utf16().collect();
    for found in back_reference.captures_iter(unescaped) {
        // Group 1 always takes part in a match of `\$([0-9]+)`.
        let Some(digits) = found.get(1) else {
            continue;
        };
        if digits.as_str().starts_with('0') {
            continue;
        }
        // Kafka's Integer.parseInt: a reference too long for an int throws there; it cannot be a
        // group either way, so it is left as text here.
        let Ok(mut index) = digits.as_str().parse::<u64>() else {
            continue;
        };
        while index > group_count as u64 && index >= 10 {
            index /= 10;
        }
        if index > group_count as u64 {
            let group_start = unescaped[..digits.start()].encode_utf16().count();
            let at = (group_start - 1).min(value.len());
            value.insert(at, u16::from(b'\\'));
        }
    }
    String::from_utf16_lossy(&value)
}

/// Java's `Matcher.appendReplacement` reading of `replacement` against `pattern`'s groups, done
/// once: `\x` is `x`; `$` and digits is the longest group number that exists (the first digit
/// always counts); `${name}` a named group.
fn parse_replacement(replacement: &str, pattern: &Regex) -> Result<Vec<Piece>, ReplacementError> {
    let group_count = pattern.captures_len() - 1;
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => text.push(
                chars
                    .next()
                    .ok_or(ReplacementError::EscapedCharacterMissing)?,
            ),
            '$' => {
                let next = chars.next().ok_or(ReplacementError::GroupIndexMissing)?;
                let group = if next == '{' {
                    let mut name = String::new();
                    while let Some(&c) = chars.peek() {
                        if !c.is_ascii_alphanumeric() {
                            break;
                        }
                        name.push(c);
                        let _ = chars.next();
                    }
                    if name.is_empty() {
                        return Err(ReplacementError::EmptyGroupName);
                    }
                    if chars.next() != Some('}') {
                        return Err(ReplacementError::GroupNameUnclosed);
                    }
                    if name.starts_with(|c: char| c.is_ascii_digit()) {
                        return Err(ReplacementError::GroupNameStartsWithDigit(name));
                    }
                    pattern
                        .capture_names()
                        .position(|group| group == Some(name.as_str()))
                        .ok_or(ReplacementError::NoGroupNamed(name))?
                } else {
                    let mut group = next
                        .to_digit(10)
                        .ok_or(ReplacementError::IllegalGroupReference)?
                        as usize;
                    while let Some(digit) = chars.peek().and_then(|c| c.to_digit(10)) {
                        let longer = group * 10 + digit as usize;
                        if longer > group_count {
                            break;
                        }
                        group = longer;
                        let _ = chars.next();
                    }
                    if group > group_count {
                        return Err(ReplacementError::NoGroup(group));
                    }
                    group
                };
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Group(group));
            }
            other => text.push(other),
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

impl Rule {
    fn apply(&self, distinguished_name: &str) -> Option<String> {
        let Rule::Replace(replace) = self else {
            return Some(distinguished_name.to_owned());
        };
        if !replace.whole.is_match(distinguished_name) {
            return None;
        }
        let replaced = replace.replace_all(distinguished_name);
        Some(match replace.case {
            Case::Keep => replaced,
            Case::Lower => replaced.to_lowercase(),
            Case::Upper => replaced.to_uppercase(),
        })
    }
}

impl Replace {
    /// Java's `String.replaceAll`: every match `Matcher.find` finds (after an empty match, the
    /// search goes on one character later), replaced.
    fn replace_all(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut appended = 0;
        let mut from = 0;
        while from <= text.len() {
            let Some(found) = self.pattern.captures_at(text, from) else {
                break;
            };
            let whole = found.get_match();
            out.push_str(&text[appended..whole.start()]);
            for piece in &self.replacement {
                match piece {
                    Piece::Text(literal) => out.push_str(literal),
                    Piece::Group(group) => {
                        out.push_str(found.get(*group).map_or("", |text| text.as_str()))
                    }
                }
            }
            appended = whole.end();
            let Some(next) = next_search(text, whole) else {
                break;
            };
            from = next;
        }
        out.push_str(&text[appended..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(rules: &str, name: &str) -> Option<String> {
        SslPrincipalMapper::parse(rules).expect(rules).map(name)
    }

    #[test]
    fn default_rules_are_what_default_parses_to() {
        let parsed = SslPrincipalMapper::parse("DEFAULT").expect("DEFAULT parses");
        assert!(matches!(parsed.rules.as_slice(), [Rule::Default]));
        let built = SslPrincipalMapper::default_rules();
        assert!(matches!(built.rules.as_slice(), [Rule::Default]));
    }

    /// Kafka's own cases (SslPrincipalMapperTest, 3.x).
    #[test]
    fn kafka_mapper_test_cases() {
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
                     RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
                     RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,\
                     RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,\
                     DEFAULT";
        for (name, expected) in [
            ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
            ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
            ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
            ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ] {
            assert_eq!(mapped(rules, name).as_deref(), Some(expected), "{name}");
        }
        assert_eq!(
            mapped("RULE:^CN=(.*),OU=ServiceUsers.*$/$1/", "CN=Duke,OU=x").as_deref(),
            None
        );
        assert_eq!(
            mapped(
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1@$2/",
                "CN=Duke,OU=ServiceUsers"
            )
            .as_deref(),
            Some("Duke@$2"),
            "a group that does not exist is text (escapeLiteralBackReferences)"
        );
    }

    #[test]
    fn rules_split_as_kafka_splits_them() {
        for (rules, count) in [
            ("DEFAULT", 1),
            ("  DEFAULT  ,  DEFAULT ", 2),
            ("RULE:^CN=(.*?),OU=x$/$1/, DEFAULT", 2),
            ("RULE:a\\/b/c\\/d/L", 1),
            (",,DEFAULT,,", 1),
            ("", 0),
        ] {
            assert_eq!(
                SslPrincipalMapper::parse(rules).expect(rules).rules.len(),
                count,
                "{rules}"
            );
        }
        assert_eq!(mapped("RULE:a\\/b/c\\/d/", "a/b").as_deref(), Some("c/d"));
        assert_eq!(mapped("", "CN=x"), None, "no rules: nothing maps");
    }

    #[test]
    fn bad_rules_are_named() {
        for (rules, expected) in [
            ("DEFAULTX", "unmatched text `X`"),
            ("RULE:a/b/Lx", "unmatched text `x`"),
            ("RULE:abc", "invalid rule `RULE:abc`"),
            ("garbage, DEFAULT", "invalid rule `garbage`"),
            ("RULE:(?<=a)b/c/", "invalid pattern"),
            ("RULE:(a/b/", "invalid pattern"),
            ("RULE:a/$1/", "No group 1"),
            ("RULE:(a)/$x/", "Illegal group reference"),
            (
                "RULE:(a)/${3}/",
                "capturing group name {3} starts with digit character",
            ),
            ("RULE:(a)/${}/", "0 length name"),
            ("RULE:(?P<user>a)/${who}/", "No group with name {who}"),
        ] {
            let error = SslPrincipalMapper::parse(rules)
                .err()
                .unwrap_or_else(|| panic!("{rules} parsed"))
                .to_string();
            assert!(error.contains(expected), "{rules}: {error}");
        }
    }

    #[test]
    fn replacements_read_groups_as_java_does() {
        let name = "CN=alice,OU=eng,O=ex";
        let rule = r"RULE:^CN=([a-z]+),OU=([a-z]+),O=([a-z]+)$";
        for (replacement, expected) in [
            ("$1", "alice"),
            // The longest group number that exists: group 1, then the text 2.
            ("$12", "alice2"),
            ("$0", name),
            (r"\$1", "$1"),
            ("$3.$2.$1", "ex.eng.alice"),
            // Beyond the groups: text (Kafka escapes it before Java reads it).
            ("$4", "$4"),
            ("$45", "$45"),
        ] {
            let rules = format!("{rule}/{replacement}/");
            assert_eq!(
                mapped(&rules, name).as_deref(),
                Some(expected),
                "{replacement}"
            );
        }
        assert_eq!(
            mapped("RULE:^CN=(?P<user>[a-z]+),.*$/${user}/U", name).as_deref(),
            Some("ALICE")
        );
        // Every match is replaced, the empty one at the end too (Java's replaceAll).
        assert_eq!(mapped("RULE:.*/x/", "abc").as_deref(), Some("xx"));
        assert_eq!(mapped("RULE:b*/-/", "bbb").as_deref(), Some("--"));
    }
}
