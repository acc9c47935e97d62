//! The SCRAM primitives (RFC 5802 §3) over SHA-256 or SHA-512, from the `hmac`, `sha2` and
//! `pbkdf2` crates, and a comparison whose time does not depend on where inputs differ.
//!
//! Must never: branch on secret bytes (see [`equal_constant_time`]).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::ScramMechanism;

/// HMAC(key, data) with the mechanism's hash.
pub(crate) fn hmac(mechanism: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => {
            // new_from_slice accepts keys of any length (HMAC hashes long keys), so it cannot fail.
            let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
                .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        ScramMechanism::Sha512 => {
            let mut mac = <Hmac<Sha512> as Mac>::new_from_slice(key)
                .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
    }
}

/// H(data).
pub(crate) fn hash(mechanism: ScramMechanism, data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
    }
}

/// SaltedPassword = Hi(password, salt, iterations), PBKDF2 with the mechanism's HMAC.
pub(crate) fn salted_password(
    mechanism: ScramMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let mut out = vec![0u8; mechanism.key_bytes()];
    match mechanism {
        ScramMechanism::Sha256 => {
            pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
        }
        ScramMechanism::Sha512 => {
            pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
        }
    }
    out
}

/// (StoredKey, ServerKey) of a salted password.
pub(crate) fn stored_and_server_keys(
    mechanism: ScramMechanism,
    salted: &[u8],
) -> (Vec<u8>, Vec<u8>) {
    let client_key = hmac(mechanism, salted, b"Client Key");
    (
        hash(mechanism, &client_key),
        hmac(mechanism, salted, b"Server Key"),
    )
}

/// Equality that looks at every byte whatever the first difference, so its time says nothing about
/// how much of a secret a guess got right. Lengths are public (fixed per mechanism).
pub(crate) fn equal_constant_time(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_equality() {
        assert!(equal_constant_time(b"abc", b"abc"));
        assert!(!equal_constant_time(b"abc", b"abd"));
        assert!(!equal_constant_time(b"abc", b"ab"));
    }
}
