//! Go's `text/tabwriter` as kubectl configures it (space padding, left aligned, no flags).
//!
//! kubectl writes tab-separated cells and lets `tabwriter` align them, so reproducing its
//! output means reproducing the alignment rules exactly:
//! - a cell is the text before a tab; the text after a line's last tab is not a cell (it is
//!   never padded and does not widen any column);
//! - a *column block* is a run of consecutive lines that all have a cell in that column; a line
//!   with fewer cells ends the block, so widths are computed per block, not per document;
//! - a column's width is the widest cell in its block plus `padding`, at least `min_width`;
//!   widths count characters, not bytes.

/// Aligns `text` (lines of tab-terminated cells) the way Go's
/// `tabwriter.NewWriter(out, min_width, 8, padding, ' ', 0)` would print it.
pub(crate) fn align(text: &str, min_width: usize, padding: usize) -> String {
    let lines: Vec<Vec<&str>> = text.split('\n').map(|l| l.split('\t').collect()).collect();
    let mut layout = Layout {
        lines: &lines,
        min_width,
        padding,
        out: String::with_capacity(text.len() * 2),
    };
    let mut widths = Vec::new();
    layout.format(&mut widths, 0, lines.len());
    layout.out
}

struct Layout<'a> {
    lines: &'a [Vec<&'a str>],
    min_width: usize,
    padding: usize,
    out: String,
}

impl Layout<'_> {
    /// Whether line `i` has a (tab-terminated) cell in `column`.
    fn has_cell(&self, i: usize, column: usize) -> bool {
        column + 1 < self.lines[i].len()
    }

    /// Go's `format`: finds the blocks of column `widths.len()` within `[line0, line1)`,
    /// sizes each, and recurses into the next column inside it.
    fn format(&mut self, widths: &mut Vec<usize>, mut line0: usize, line1: usize) {
        let column = widths.len();
        let mut this = line0;
        while this < line1 {
            if !self.has_cell(this, column) {
                this += 1;
                continue;
            }
            self.write_lines(widths, line0, this);
            line0 = this;
            let mut width = self.min_width;
            while this < line1 && self.has_cell(this, column) {
                let cell = self.lines[this][column].chars().count();
                width = width.max(cell + self.padding);
                this += 1;
            }
            widths.push(width);
            self.format(widths, line0, this);
            widths.pop();
            line0 = this;
        }
        self.write_lines(widths, line0, line1);
    }

    fn write_lines(&mut self, widths: &[usize], line0: usize, line1: usize) {
        for i in line0..line1 {
            let line = &self.lines[i];
            for (j, cell) in line.iter().enumerate() {
                self.out.push_str(cell);
                if let Some(&width) = widths.get(j)
                    && j + 1 < line.len()
                {
                    let pad = width.saturating_sub(cell.chars().count());
                    self.out.extend(std::iter::repeat_n(' ', pad));
                }
            }
            // The text after the last newline is a partial line: no newline of its own.
            if i + 1 < self.lines.len() {
                self.out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::align;

    #[test]
    fn blocks_are_sized_separately() {
        let text = "Name:\tweb\nService Account:\tdefault\nIPs:\n  IP:\t10.0.0.1\n";
        assert_eq!(
            align(text, 0, 2),
            "Name:             web\nService Account:  default\nIPs:\n  IP:  10.0.0.1\n"
        );
    }

    #[test]
    fn terminated_cells_are_padded_even_when_the_rest_is_empty() {
        assert_eq!(align("IP:\t\nNode:\tx\n", 0, 2), "IP:    \nNode:  x\n");
    }

    #[test]
    fn nested_columns() {
        let text = "a\tb\tc\nlonger\tb\tc\nx\ty\n";
        assert_eq!(align(text, 0, 1), "a      b c\nlonger b c\nx      y\n");
    }

    #[test]
    fn kubectl_get_table() {
        let text = "NAME\tREADY\tSTATUS\tRESTARTS\tAGE\nweb\t1/1\tRunning\t0\t5s\n";
        assert_eq!(
            align(text, 6, 3),
            "NAME   READY   STATUS    RESTARTS   AGE\nweb    1/1     Running   0          5s\n"
        );
    }
}
