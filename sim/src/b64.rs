//! The two base64 codecs on the guest-agent path, written out so the simulator needs no extra
//! crate:
//! * [`encode`]: GLib's `g_base64_encode` / Perl's `encode_base64($x, '')`: standard alphabet,
//!   `=` padding, no line breaks;
//! * [`decode`]: what qemu-guest-agent does with `buf-b64` / `input-data`: `qbase64_decode`
//!   first refuses any character outside `A-Za-z0-9+/=\n` with `Base64 data contains invalid
//!   characters` [SRC qemu util/base64.c], then `g_base64_decode` decodes leniently: `=` counts as
//!   a zero digit and only trims the output of its own 4-digit group, `\n` is skipped, a trailing
//!   incomplete group is dropped [SRC glib gbase64.c `g_base64_decode_step`].

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding, one line.
pub fn encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((v >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn rank(c: u8) -> Option<u32> {
    match c {
        b'A'..=b'Z' => Some(u32::from(c - b'A')),
        b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
        b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        b'=' => Some(0),
        _ => None,
    }
}

/// qemu-guest-agent's decoding (see the module doc); `Err` carries the agent's error text.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    if text
        .bytes()
        .any(|c| !(c.is_ascii_alphanumeric() || b"+/=\n".contains(&c)))
    {
        return Err("Base64 data contains invalid characters".into());
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut v, mut i, mut last) = (0u32, 0, [0u8; 2]);
    for c in text.bytes() {
        let Some(r) = rank(c) else { continue };
        last = [c, last[0]];
        v = (v << 6) | r;
        i += 1;
        if i == 4 {
            out.push((v >> 16) as u8);
            if last[1] != b'=' {
                out.push((v >> 8) as u8);
            }
            if last[0] != b'=' {
                out.push(v as u8);
            }
            (v, i) = (0, 0);
        }
    }
    Ok(out)
}

/// Bytes as the Perl string PVE holds after `decode_base64`: one character per byte, so that
/// `to_json(…, {utf8 => 1})` prints each byte ≥ 0x80 as the UTF-8 encoding of U+0080..U+00FF
/// (non-ASCII content comes out Latin-1-to-UTF-8 encoded; map each character back to one byte).
pub fn latin1(data: &[u8]) -> String {
    data.iter().map(|&b| char::from(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_matches_known_vectors() {
        for (plain, coded) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foobar", "Zm9vYmFy"),
            (b"\x00\xff\xfe", "AP/+"),
        ] {
            assert_eq!(encode(plain), coded);
            assert_eq!(decode(coded).unwrap(), plain);
        }
        // Perl's encode_base64 breaks lines every 76 characters; the agent skips the newlines.
        let long = vec![7u8; 200];
        let mut wrapped = encode(&long);
        wrapped.insert(76, '\n');
        wrapped.push('\n');
        assert_eq!(decode(&wrapped).unwrap(), long);
        assert_eq!(
            decode("Zm9v!").unwrap_err(),
            "Base64 data contains invalid characters"
        );
        assert_eq!(decode("Zm9vY").unwrap(), b"foo", "incomplete group dropped");
        assert_eq!(latin1(b"a\xe9"), "a\u{e9}");
    }
}
