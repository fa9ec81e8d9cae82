//! JSON values as YAML the way `kubectl -o yaml` prints them: `sigs.k8s.io/yaml` converts the
//! JSON into maps with sorted keys and encodes them with go-yaml v2 (YAML 1.1), without line
//! wrapping. What matters for identical output is go-yaml's choice of scalar style:
//! - a string that would read back as something else (`"true"`, `"123"`, `"1:20"`, `""`,
//!   `"2025-01-10T12:00:00Z"`, `"~"`, `"y"`) is double-quoted;
//! - a string that is a string either way is plain, unless its characters forbid that (leading
//!   indicator, `: `, ` #`, surrounding spaces), then single-quoted;
//! - a string with line breaks is a literal block (`|`, `|-`, `|+`), unless it has characters
//!   a block cannot hold (tabs, spaces before a break), then double-quoted with escapes;
//! - sequences under a key are not indented further (`key:\n- a`).

use serde_json::{Map, Number, Value};

/// `v` as kubectl's YAML (ends with a newline).
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    node(&mut out, v, 0, false);
    out
}

/// Writes `v` whose line (indentation and any `- ` or `key: ` before it) is already started
/// when `inline` is set; collections then continue on that line with their first entry.
fn node(out: &mut String, v: &Value, indent: usize, inline: bool) {
    match v {
        Value::Object(m) if !m.is_empty() => map(out, m, indent, inline),
        Value::Array(a) if !a.is_empty() => seq(out, a, indent, inline),
        _ => {
            if !inline {
                pad(out, indent);
            }
            scalar(out, v, indent + 2, false);
            out.push('\n');
        }
    }
}

fn map(out: &mut String, m: &Map<String, Value>, indent: usize, inline: bool) {
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 || !inline {
            pad(out, indent);
        }
        string(out, k, indent + 2, true);
        out.push(':');
        match v {
            Value::Object(child) if !child.is_empty() => {
                out.push('\n');
                map(out, child, indent + 2, false);
            }
            // go-yaml keeps a mapping's sequences at the key's own indentation.
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                seq(out, items, indent, false);
            }
            _ => {
                out.push(' ');
                scalar(out, v, indent + 2, false);
                out.push('\n');
            }
        }
    }
}

fn seq(out: &mut String, a: &[Value], indent: usize, inline: bool) {
    for (i, item) in a.iter().enumerate() {
        if i > 0 || !inline {
            pad(out, indent);
        }
        out.push_str("- ");
        node(out, item, indent + 2, true);
    }
}

fn pad(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

fn scalar(out: &mut String, v: &Value, indent: usize, key: bool) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => string(out, s, indent, key),
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
    }
}

/// go-yaml's float text is Go's `strconv.FormatFloat(f, 'g', -1, 64)`; a JSON number without
/// a fraction was an integer to it.
fn number(n: &Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..21).contains(&exp) {
        format!("{f}")
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

fn string(out: &mut String, s: &str, indent: usize, key: bool) {
    // go-yaml's `stringv`: the wanted style...
    let wanted = if s.contains('\n') {
        Style::Literal
    } else if resolves_to_string(s) && !is_base60_float(s) {
        Style::Plain
    } else {
        Style::Double
    };
    // ...and the emitter's veto (`yaml_emitter_select_scalar_style`).
    let a = analyze(s);
    let style = match wanted {
        Style::Plain if !a.plain_allowed || (key && s.is_empty()) => {
            if a.single_allowed {
                Style::Single
            } else {
                Style::Double
            }
        }
        Style::Literal if !a.block_allowed || key => Style::Double,
        other => other,
    };
    match style {
        Style::Plain => out.push_str(s),
        Style::Single => {
            out.push('\'');
            out.push_str(&s.replace('\'', "''"));
            out.push('\'');
        }
        Style::Double => double_quoted(out, s),
        Style::Literal => literal(out, s, indent),
    }
}

/// What `yaml_emitter_analyze_scalar` allows for a string (block context).
struct Analysis {
    plain_allowed: bool,
    single_allowed: bool,
    block_allowed: bool,
}

fn analyze(s: &str) -> Analysis {
    let mut a = Analysis {
        plain_allowed: true,
        single_allowed: true,
        block_allowed: true,
    };
    let chars: Vec<char> = s.chars().collect();
    let (Some(&first), Some(&last)) = (chars.first(), chars.last()) else {
        a.plain_allowed = false;
        a.block_allowed = false;
        return a;
    };
    let blank = |c: char| matches!(c, ' ' | '\t' | '\n');
    let blank_or_end = |i: usize| chars.get(i).is_none_or(|c| blank(*c));
    let mut indicators = s.starts_with("---") || s.starts_with("...");
    let (mut special, mut space_break, mut break_space) = (false, false, false);
    for (i, &c) in chars.iter().enumerate() {
        let indicator = if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => true,
                '?' | ':' | '-' => blank_or_end(i + 1),
                _ => false,
            }
        } else {
            match c {
                ':' => blank_or_end(i + 1),
                '#' => blank(chars[i - 1]),
                _ => false,
            }
        };
        indicators |= indicator;
        special |= !printable(c);
        if i > 0 {
            space_break |= chars[i - 1] == ' ' && c == '\n';
            break_space |= chars[i - 1] == '\n' && c == ' ';
        }
    }
    if first == ' ' || first == '\n' || last == ' ' || last == '\n' || indicators {
        a.plain_allowed = false;
    }
    if last == ' ' {
        a.block_allowed = false;
    }
    if break_space {
        a.plain_allowed = false;
        a.single_allowed = false;
    }
    if space_break || special {
        a.plain_allowed = false;
        a.single_allowed = false;
        a.block_allowed = false;
    }
    if s.contains('\n') {
        a.plain_allowed = false;
    }
    a
}

/// go-yaml's `is_printable` (note: tabs and characters beyond the BMP are not).
fn printable(c: char) -> bool {
    matches!(u32::from(c), 0x0A | 0x20..=0x7E | 0xA0..=0xD7FF | 0xE000..=0xFFFD) && c != '\u{FEFF}'
}

/// Whether go-yaml's `resolve` reads the plain text back as a string (YAML 1.1: booleans like
/// `yes`/`on`/`y`, nulls like `~`, ints like `0x1F`, floats like `1e3` or `.5`, timestamps).
fn resolves_to_string(s: &str) -> bool {
    const SPECIAL: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE",
        "on", "On", "ON", "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off",
        "OFF", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF",
    ];
    if SPECIAL.contains(&s) {
        return false;
    }
    match s.as_bytes().first() {
        Some(b'.') => s.parse::<f64>().is_err() || s.contains(|c: char| c.is_ascii_alphabetic()),
        Some(b'+' | b'-' | b'0'..=b'9') => {
            if is_timestamp(s) {
                return false;
            }
            let plain = s.replace('_', "");
            !(go_int(&plain) || is_yaml_float(&plain) || is_binary_int(&plain))
        }
        _ => true,
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)` / `ParseUint` acceptance: decimal, `0x`, `0o`, `0b`, or
/// a leading-zero octal, with an optional sign.
fn go_int(s: &str) -> bool {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (digits, radix) = if let Some(h) = unsigned
        .strip_prefix("0x")
        .or_else(|| unsigned.strip_prefix("0X"))
    {
        (h, 16)
    } else if let Some(o) = unsigned
        .strip_prefix("0o")
        .or_else(|| unsigned.strip_prefix("0O"))
    {
        (o, 8)
    } else if let Some(b) = unsigned
        .strip_prefix("0b")
        .or_else(|| unsigned.strip_prefix("0B"))
    {
        (b, 2)
    } else if unsigned.len() > 1 && unsigned.starts_with('0') {
        (&unsigned[1..], 8)
    } else {
        (unsigned, 10)
    };
    !digits.is_empty()
        && u128::from_str_radix(digits, radix).is_ok_and(|v| v <= u128::from(u64::MAX))
}

/// go-yaml's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (base, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let base_ok = match base.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(base),
    };
    let exp_ok = exp.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    base_ok && exp_ok
}

fn is_binary_int(s: &str) -> bool {
    let unsigned = s.strip_prefix('-').unwrap_or(s);
    unsigned
        .strip_prefix("0b")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b == b'0' || b == b'1'))
}

/// go-yaml's `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`.
fn is_base60_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (main, frac) = match s.split_once('.') {
        Some((m, f)) => (m, Some(f)),
        None => (s, None),
    };
    if frac.is_some_and(|f| !f.bytes().all(|b| b.is_ascii_digit() || b == b'_')) {
        return false;
    }
    let mut parts = main.split(':');
    let first = parts.next().unwrap_or_default();
    if !first.starts_with(|c: char| c.is_ascii_digit())
        || !first.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return false;
    }
    let rest: Vec<&str> = parts.collect();
    !rest.is_empty()
        && rest.iter().all(|p| {
            let b = p.as_bytes();
            match b {
                [d] => d.is_ascii_digit(),
                [a, d] => (b'0'..=b'5').contains(a) && d.is_ascii_digit(),
                _ => false,
            }
        })
}

/// The timestamps go-yaml recognises (Go layouts `2006-1-2`, `2006-1-2 15:4:5.999999999`,
/// `2006-1-2T15:4:5.999999999Z07:00`, the last also with a lower-case `t`).
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |i: &mut usize, min: usize, max: usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() && *i - start < max {
            *i += 1;
        }
        *i - start >= min
    };
    let byte = |i: &mut usize, c: u8| {
        let found = b.get(*i) == Some(&c);
        if found {
            *i += 1;
        }
        found
    };
    let mut i = 0;
    let date = digits(&mut i, 4, 4)
        && byte(&mut i, b'-')
        && digits(&mut i, 1, 2)
        && byte(&mut i, b'-')
        && digits(&mut i, 1, 2);
    if !date {
        return false;
    }
    if i == b.len() {
        return true;
    }
    let zoned = matches!(b[i], b'T' | b't');
    if !zoned && b[i] != b' ' {
        return false;
    }
    i += 1;
    let time = digits(&mut i, 1, 2)
        && byte(&mut i, b':')
        && digits(&mut i, 1, 2)
        && byte(&mut i, b':')
        && digits(&mut i, 1, 2);
    if !time || (byte(&mut i, b'.') && !digits(&mut i, 1, 9)) {
        return false;
    }
    if !zoned {
        return i == b.len();
    }
    match &b[i..] {
        [b'Z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit()),
        _ => false,
    }
}

fn double_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '\0' => out.push_str("\\0"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0b' => out.push_str("\\v"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\x1b' => out.push_str("\\e"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{85}' => out.push_str("\\N"),
            '\u{a0}' => out.push_str("\\_"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if printable(c) => out.push(c),
            c if u32::from(c) <= 0xFF => out.push_str(&format!("\\x{:02X}", u32::from(c))),
            c if u32::from(c) <= 0xFFFF => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08X}", u32::from(c))),
        }
    }
    out.push('"');
}

/// A literal block: `|` with go-yaml's chomping (`-` without a final break, `+` with more
/// than one) and an indentation digit when the text starts with a space.
fn literal(out: &mut String, s: &str, indent: usize) {
    out.push('|');
    if s.starts_with(' ') {
        out.push('2');
    }
    let body = s.trim_end_matches('\n');
    let trailing = s.len() - body.len();
    match trailing {
        0 => out.push('-'),
        1 => {}
        _ => out.push('+'),
    }
    out.push('\n');
    let lines: Vec<&str> = body.split('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        if !line.is_empty() {
            pad(out, indent);
            out.push_str(line);
        }
        if i + 1 < lines.len() {
            out.push('\n');
        }
    }
    // Every final break but the last one (which ends the scalar's line) is content.
    for _ in 1..trailing {
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(s: &str) -> String {
        let text = to_yaml(&json!({ "k": s }));
        text.strip_suffix('\n').unwrap_or(&text).to_owned()
    }

    #[test]
    fn string_styles_follow_go_yaml() {
        for (input, expected) in [
            ("web", "k: web"),
            ("127.0.0.1", "k: 127.0.0.1"),
            ("1.2.3", "k: 1.2.3"),
            ("", "k: \"\""),
            ("true", "k: \"true\""),
            ("yes", "k: \"yes\""),
            ("y", "k: \"y\""),
            ("123", "k: \"123\""),
            ("0x1F", "k: \"0x1F\""),
            ("12e3", "k: \"12e3\""),
            (".5", "k: \".5\""),
            ("1:20", "k: \"1:20\""),
            ("~", "k: \"~\""),
            ("2025-01-10T12:00:00Z", "k: \"2025-01-10T12:00:00Z\""),
            ("2025-01-10", "k: \"2025-01-10\""),
            ("x: y", "k: 'x: y'"),
            (
                "containers with incomplete status: [side]",
                "k: 'containers with incomplete status: [side]'",
            ),
            ("[a]", "k: '[a]'"),
            ("-", "k: '-'"),
            ("-c", "k: -c"),
            ("a #b", "k: 'a #b'"),
            ("a#b", "k: a#b"),
            (" x", "k: ' x'"),
            ("it's", "k: it's"),
            ("'q'", "k: '''q'''"),
            ("*x", "k: '*x'"),
            ("?x", "k: ?x"),
            ("echo init > /work/x", "k: echo init > /work/x"),
            ("http://x:8080/a", "k: http://x:8080/a"),
            ("a\tb", "k: \"a\\tb\""),
            ("a\nb\n", "k: |\n  a\n  b"),
            ("a\nb", "k: |-\n  a\n  b"),
            ("a\n\n", "k: |+\n  a\n"),
            (" a\nb\n", "k: |2\n   a\n  b"),
            ("a \nb", "k: \"a \\nb\""),
        ] {
            assert_eq!(one(input), expected, "{input:?}");
        }
    }

    #[test]
    fn layout_like_kubectl() {
        let v = json!({
            "apiVersion": "v1",
            "items": [{"metadata": {"name": "a", "labels": {}}, "spec": {"containers": [
                {"command": ["sh", "-c", "sleep 1"], "name": "app", "ports": [{"containerPort": 80}]}
            ]}}],
            "kind": "List",
            "metadata": {"resourceVersion": ""},
            "nested": [[1, 2], []],
            "n": "y",
            "f": [1.5, 1e21, 0.00001, null, true],
        });
        assert_eq!(
            to_yaml(&v),
            "\
apiVersion: v1
f:
- 1.5
- 1e+21
- 1e-05
- null
- true
items:
- metadata:
    labels: {}
    name: a
  spec:
    containers:
    - command:
      - sh
      - -c
      - sleep 1
      name: app
      ports:
      - containerPort: 80
kind: List
metadata:
  resourceVersion: \"\"
\"n\": \"y\"
nested:
- - 1
  - 2
- []
"
        );
    }
}
