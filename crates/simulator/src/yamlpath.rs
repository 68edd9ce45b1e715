//! Line <-> field-path mapping for YAML text, so both parse errors (which know a line) and
//! validation errors (which know a field) can name the line *and* the field.
//!
//! This is a light indentation walk, not a YAML parser: it understands block mappings and
//! block sequences, which is what scenario files are written in. Flow collections (`{}`/`[]`)
//! are treated as leaf values; that only makes a path shorter, never wrong.

/// One line's position in the document tree.
#[derive(Debug, Clone)]
struct Frame {
    indent: usize,
    seg: String,
    /// For a sequence frame: the next index.
    is_seq: bool,
}

/// Where a line stands in the document tree.
#[derive(Debug, Clone, Default)]
struct LineInfo {
    /// The field path of the line (`workload.pods[1].requests.cpu`).
    path: String,
    /// The path of the mapping the line's key belongs to (`workload.pods[1].requests`).
    parent: String,
    /// 1-based column of the line's key, after any `- ` prefixes (0 when it has none).
    key_column: usize,
}

/// Compute the field path (`workload.pods[1].requests.cpu`) of every line (1-based index into
/// the result; index 0 unused). Lines that are blank or comments inherit the previous path.
pub fn paths_by_line(text: &str) -> Vec<String> {
    walk(text).into_iter().map(|l| l.path).collect()
}

/// [`paths_by_line`] with each line's mapping and key column.
fn walk(text: &str) -> Vec<LineInfo> {
    let mut out = vec![LineInfo::default()];
    let mut stack: Vec<Frame> = Vec::new();
    // Sequence counters keyed by the indent of the `-`.
    let mut seq_counters: Vec<(usize, usize)> = Vec::new();
    let mut last = LineInfo::default();
    for raw in text.lines() {
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("---") {
            out.push(last.clone());
            continue;
        }
        let mut indent = raw.len() - trimmed.len();
        let mut rest = trimmed;
        // Handle one or more `- ` prefixes.
        loop {
            if rest == "-" || rest.starts_with("- ") {
                while stack
                    .last()
                    .is_some_and(|f| f.indent > indent || (f.indent == indent && !f.is_seq))
                {
                    stack.pop();
                }
                seq_counters.retain(|(i, _)| *i <= indent);
                // A new item at this indent.
                let idx = match seq_counters.iter_mut().find(|(i, _)| *i == indent) {
                    Some((_, n)) => {
                        *n += 1;
                        *n
                    }
                    None => {
                        seq_counters.push((indent, 0));
                        0
                    }
                };
                while stack.last().is_some_and(|f| f.indent >= indent && f.is_seq) {
                    stack.pop();
                }
                stack.push(Frame {
                    indent,
                    seg: format!("[{idx}]"),
                    is_seq: true,
                });
                let after = &rest[1..];
                let sp = after.len() - after.trim_start().len();
                indent += 1 + sp;
                rest = after.trim_start();
                if rest.is_empty() {
                    break;
                }
                continue;
            }
            break;
        }
        let mut key_column = 0;
        let mut parent = render(&stack);
        if let Some(key) = mapping_key(rest) {
            // Close frames at or deeper than this key's indent.
            while stack.last().is_some_and(|f| f.indent >= indent) {
                stack.pop();
            }
            seq_counters
                .retain(|(i, _)| *i < indent || stack.iter().any(|f| f.is_seq && f.indent == *i));
            key_column = indent + 1;
            parent = render(&stack);
            stack.push(Frame {
                indent,
                seg: key,
                is_seq: false,
            });
        }
        last = LineInfo {
            path: render(&stack),
            parent,
            key_column,
        };
        out.push(last.clone());
    }
    out
}

fn mapping_key(s: &str) -> Option<String> {
    let (k, _) = if let Some(stripped) = s.strip_prefix('"') {
        let end = stripped.find('"')?;
        let k = &stripped[..end];
        if !stripped[end + 1..].trim_start().starts_with(':') {
            return None;
        }
        return Some(k.to_string());
    } else {
        let pos = s
            .find(": ")
            .or_else(|| s.strip_suffix(':').map(|x| x.len()))?;
        (&s[..pos], ())
    };
    if k.is_empty() || k.contains('{') || k.contains('[') {
        return None;
    }
    Some(k.trim().to_string())
}

fn render(stack: &[Frame]) -> String {
    let mut s = String::new();
    for f in stack {
        if f.is_seq {
            s.push_str(&f.seg);
        } else {
            if !s.is_empty() {
                s.push('.');
            }
            s.push_str(&f.seg);
        }
    }
    s
}

/// The field path at a 1-based line.
pub fn path_at_line(text: &str, line: usize) -> String {
    let paths = paths_by_line(text);
    paths.get(line).cloned().unwrap_or_default()
}

/// The path of the mapping that starts at a 1-based line and column, or, when no block
/// mapping's key starts there, the line's path. A YAML reader reports a missing field at the
/// first key of the mapping that lacks it; naming that key's path would send the user to the
/// wrong field (`spec.requirements` instead of `spec`, which lacks `nodeClassRef`).
pub fn mapping_at(text: &str, line: usize, column: usize) -> String {
    let lines = walk(text);
    match lines.get(line) {
        Some(l) if l.key_column > 0 && l.key_column == column => l.parent.clone(),
        Some(l) => l.path.clone(),
        None => String::new(),
    }
}

/// The first 1-based line whose path equals `path` or, failing that, the line of its longest
/// existing prefix (the field may be missing and defaulted).
pub fn line_of_path(text: &str, path: &str) -> Option<usize> {
    let paths = paths_by_line(text);
    let mut p = path.to_string();
    loop {
        let under = |x: &String| {
            *x == p
                || (x.starts_with(p.as_str())
                    && matches!(x.as_bytes().get(p.len()), Some(b'.') | Some(b'[')))
        };
        if let Some(i) = paths.iter().position(under) {
            return Some(i);
        }
        let cut = p.rfind(['.', '['])?;
        p.truncate(cut);
        if p.is_empty() {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "name: x
workload:
  pods:
    - name: a
      requests:
        cpu: 1
    - name: b
      requests: {cpu: 2}
nodePools:
  - metadata:
      name: default
    spec:
      template:
        spec:
          requirements:
            - key: k
              operator: In
";

    #[test]
    fn paths() {
        let p = paths_by_line(DOC);
        assert_eq!(p[1], "name");
        assert_eq!(p[3], "workload.pods");
        assert_eq!(p[4], "workload.pods[0].name");
        assert_eq!(p[6], "workload.pods[0].requests.cpu");
        assert_eq!(p[7], "workload.pods[1].name");
        assert_eq!(p[8], "workload.pods[1].requests");
        assert_eq!(p[11], "nodePools[0].metadata.name");
        assert_eq!(p[16], "nodePools[0].spec.template.spec.requirements[0].key");
        assert_eq!(
            p[17],
            "nodePools[0].spec.template.spec.requirements[0].operator"
        );
    }

    #[test]
    fn mapping_of_a_first_key() {
        // Line 16 is `- key: k` (key at column 15), the first key of requirements[0].
        assert_eq!(
            mapping_at(DOC, 16, 15),
            "nodePools[0].spec.template.spec.requirements[0]"
        );
        // Line 15 is `requirements:` (key at column 11), the first key of the template spec.
        assert_eq!(mapping_at(DOC, 15, 11), "nodePools[0].spec.template.spec");
        // Inside a flow mapping the line's path is the mapping.
        assert_eq!(mapping_at(DOC, 8, 18), "workload.pods[1].requests");
        assert_eq!(mapping_at(DOC, 99, 1), "");
    }

    #[test]
    fn lines() {
        assert_eq!(line_of_path(DOC, "workload.pods[1].requests"), Some(8));
        assert_eq!(line_of_path(DOC, "workload.pods[1].count"), Some(7));
        assert_eq!(line_of_path(DOC, "nope"), None);
    }
}
