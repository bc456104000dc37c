//! The profiles layout's (product §9) alphabetic folder names: `A … Z, AA, AB … ZZ, AAA …` — the
//! bijective base-26 numerals, so every name is used exactly once and `Z` is
//! followed by `AA` (not `BA`).

use std::cmp::Ordering;

/// The `n`-th name, 0-based: 0 → `A`, 25 → `Z`, 26 → `AA`, 701 → `ZZ`.
pub fn alpha_name(n: u64) -> String {
    let mut n = u128::from(n) + 1;
    let mut rev = Vec::new();
    while n > 0 {
        n -= 1;
        rev.push(b'A' + (n % 26) as u8);
        n /= 26;
    }
    rev.reverse();
    String::from_utf8(rev).unwrap_or_default()
}

/// The name after `name` (`Z` → `AA`, `AZ` → `BA`, `ZZ` → `AAA`). A name
/// that is not alphabetic has no place in the sequence: the result is `A`.
pub fn next_alpha(name: &str) -> String {
    if !is_alpha_name(name) {
        return "A".to_owned();
    }
    let mut bytes = name.as_bytes().to_vec();
    for b in bytes.iter_mut().rev() {
        if *b == b'Z' {
            *b = b'A';
        } else {
            *b += 1;
            return String::from_utf8(bytes).unwrap_or_default();
        }
    }
    // All were Z: one digit longer, all A.
    "A".repeat(bytes.len() + 1)
}

/// True for `[A-Z]+`.
pub(crate) fn is_alpha_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase())
}

/// Sequence order: alphabetic names by (length, text) so `Z < AA`; other
/// names after them, by text.
pub(crate) fn alpha_cmp(a: &str, b: &str) -> Ordering {
    match (is_alpha_name(a), is_alpha_name(b)) {
        (true, true) => a.len().cmp(&b.len()).then_with(|| a.cmp(b)),
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => a.cmp(b),
    }
}

/// The name after the largest alphabetic name of `names` (`A` if none).
pub(crate) fn next_after<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .filter(|n| is_alpha_name(n))
        .max_by(|a, b| alpha_cmp(a, b))
        .map(next_alpha)
        .unwrap_or_else(|| "A".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_bijective_base_26() {
        assert_eq!(alpha_name(0), "A");
        assert_eq!(alpha_name(25), "Z");
        assert_eq!(alpha_name(26), "AA");
        assert_eq!(alpha_name(27), "AB");
        assert_eq!(alpha_name(701), "ZZ");
        assert_eq!(alpha_name(702), "AAA");
        for n in 0..2000 {
            assert_eq!(next_alpha(&alpha_name(n)), alpha_name(n + 1));
            assert_eq!(
                alpha_cmp(&alpha_name(n), &alpha_name(n + 1)),
                Ordering::Less
            );
        }
    }

    #[test]
    fn non_alphabetic_names_sort_last() {
        let mut v = vec!["misc", "AA", "Z", "B"];
        v.sort_by(|a, b| alpha_cmp(a, b));
        assert_eq!(v, ["B", "Z", "AA", "misc"]);
        assert_eq!(next_after(["misc", "Z", "B"]), "AA");
        assert_eq!(next_after(["misc"]), "A");
        assert_eq!(next_alpha("a1"), "A");
    }
}
