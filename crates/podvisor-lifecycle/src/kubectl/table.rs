//! The `kubectl get` table layout: kubectl's printers use Go's `tabwriter` with minimum width 6
//! and padding 3 (`printers.GetNewTabWriter`), so columns are left aligned, three spaces apart,
//! and the last column is never padded.

use super::PodRow;
use super::tabwriter::align;

/// The `kubectl get pods` column headers; `-o wide` adds [`WIDE_HEADERS`].
pub const HEADERS: [&str; 5] = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"];

/// The columns `-o wide` adds after [`HEADERS`].
pub const WIDE_HEADERS: [&str; 4] = ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"];

/// The cells of one row in column order (wide adds IP, NODE, NOMINATED NODE, READINESS GATES).
pub fn row_cells(row: &PodRow, wide: bool) -> Vec<String> {
    let mut cells = vec![
        row.name.clone(),
        row.ready.clone(),
        row.status.clone(),
        row.restarts.clone(),
        row.age.clone(),
    ];
    if wide {
        cells.extend([
            row.ip.clone(),
            row.node.clone(),
            row.nominated_node.clone(),
            row.readiness_gates.clone(),
        ]);
    }
    cells
}

/// The header cells (wide adds the four wide columns).
pub fn header_cells(wide: bool) -> Vec<String> {
    let mut cells: Vec<String> = HEADERS.iter().map(|h| (*h).to_owned()).collect();
    if wide {
        cells.extend(WIDE_HEADERS.iter().map(|h| (*h).to_owned()));
    }
    cells
}

/// `kubectl get pods [-o wide]` output for `rows`: the header line, then one line per row,
/// each ending with a newline.
pub fn table_lines(rows: &[PodRow], wide: bool) -> String {
    let mut lines = vec![header_cells(wide)];
    lines.extend(rows.iter().map(|r| row_cells(r, wide)));
    table_text(&lines)
}

/// Lays out any table of cells (first line usually the header) as kubectl's printers do.
pub fn table_text(lines: &[Vec<String>]) -> String {
    let mut text = String::new();
    for cells in lines {
        text.push_str(&cells.join("\t"));
        text.push('\n');
    }
    align(&text, 6, 3)
}

/// Widens `widths` for `cells` the way kubectl's `-w` output keeps columns aligned across
/// updates (`tabwriter.RememberWidths`): a column is as wide as its widest cell so far plus 3,
/// at least 6, and never shrinks. The last cell of a line does not count.
pub fn remember_widths(widths: &mut Vec<usize>, cells: &[String]) {
    for (i, cell) in cells.iter().enumerate().take(cells.len().saturating_sub(1)) {
        let w = (cell.chars().count() + 3).max(6);
        match widths.get_mut(i) {
            Some(old) => *old = (*old).max(w),
            None => widths.push(w),
        }
    }
}

/// One line laid out with `widths` (see [`remember_widths`], which must have seen `cells`),
/// ending with a newline.
pub fn line_with_widths(cells: &[String], widths: &[usize]) -> String {
    let mut line = String::new();
    for (i, cell) in cells.iter().enumerate() {
        line.push_str(cell);
        if i + 1 < cells.len() {
            let width = widths.get(i).copied().unwrap_or(0);
            let pad = width.saturating_sub(cell.chars().count());
            line.extend(std::iter::repeat_n(' ', pad));
        }
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, status: &str, restarts: &str) -> PodRow {
        PodRow {
            name: name.to_owned(),
            ready: "1/1".to_owned(),
            status: status.to_owned(),
            restarts: restarts.to_owned(),
            age: "5m".to_owned(),
            ip: "<none>".to_owned(),
            node: "node1".to_owned(),
            nominated_node: "<none>".to_owned(),
            readiness_gates: "<none>".to_owned(),
        }
    }

    #[test]
    fn three_spaces_between_left_aligned_columns() {
        let rows = [
            row("web", "Running", "0"),
            row("crashy", "CrashLoopBackOff", "4 (10s ago)"),
        ];
        assert_eq!(
            table_lines(&rows, false),
            "\
NAME     READY   STATUS             RESTARTS      AGE
web      1/1     Running            0             5m
crashy   1/1     CrashLoopBackOff   4 (10s ago)   5m
"
        );
        assert_eq!(
            table_lines(&rows[..1], true),
            "\
NAME   READY   STATUS    RESTARTS   AGE   IP       NODE    NOMINATED NODE   READINESS GATES
web    1/1     Running   0          5m    <none>   node1   <none>           <none>
"
        );
    }

    #[test]
    fn watch_lines_keep_and_grow_widths() {
        let mut widths = Vec::new();
        let header = header_cells(false);
        remember_widths(&mut widths, &header);
        let first = row_cells(&row("web", "Running", "0"), false);
        remember_widths(&mut widths, &first);
        assert_eq!(
            line_with_widths(&first, &widths),
            "web    1/1     Running   0          5m\n"
        );
        let wider = row_cells(&row("web", "CrashLoopBackOff", "1"), false);
        remember_widths(&mut widths, &wider);
        assert_eq!(
            line_with_widths(&wider, &widths),
            "web    1/1     CrashLoopBackOff   1          5m\n"
        );
    }
}
