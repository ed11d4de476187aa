//! The NIC-by-NIC matrix of a per-link value, stored by its links only: a job of 16,384 NICs
//! has 268 M cells, of which a rail-optimised job fills about 8 per row. `m[a][b]` reads as
//! the dense matrix did (None where there is no link); rows, columns and entries are
//! iterated in the order of their NIC indices, in time proportional to the links.

use std::ops::Index;

/// One row: the links of one sending NIC, by peer NIC index.
#[derive(Debug, Clone, Default)]
pub struct MatrixRow {
    cells: Vec<(usize, Option<f64>)>,
}

const EMPTY: Option<f64> = None;

impl Index<usize> for MatrixRow {
    type Output = Option<f64>;
    fn index(&self, b: usize) -> &Option<f64> {
        match self.cells.binary_search_by_key(&b, |c| c.0) {
            Ok(i) => &self.cells[i].1,
            Err(_) => &EMPTY,
        }
    }
}

/// Row = sending NIC, column = peer NIC; only cells with a value are stored.
#[derive(Debug, Clone, Default)]
pub struct LinkMatrix {
    rows: Vec<MatrixRow>,
    /// Column a: the rows b with a value at (b, a), ascending.
    cols: Vec<Vec<usize>>,
}

impl Index<usize> for LinkMatrix {
    type Output = MatrixRow;
    fn index(&self, a: usize) -> &MatrixRow {
        &self.rows[a]
    }
}

impl LinkMatrix {
    /// The matrix of `n` NICs from (row, column, value) cells in any order; a later cell
    /// replaces an earlier one of the same place, a None value is no cell.
    pub fn new(n: usize, cells: impl IntoIterator<Item = (usize, usize, Option<f64>)>) -> Self {
        let mut rows = vec![MatrixRow::default(); n];
        for (a, b, v) in cells {
            if v.is_some() && a < n && b < n {
                rows[a].cells.push((b, v));
            }
        }
        let mut cols = vec![Vec::new(); n];
        for (a, r) in rows.iter_mut().enumerate() {
            // Stable: of two cells at one place the later stays (dedup keeps the first).
            r.cells.reverse();
            r.cells.sort_by_key(|c| c.0);
            r.cells.dedup_by_key(|c| c.0);
            for (b, _) in &r.cells {
                cols[*b].push(a);
            }
        }
        LinkMatrix { rows, cols }
    }

    /// How many NICs (rows and columns).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn get(&self, a: usize, b: usize) -> Option<f64> {
        self.rows.get(a).and_then(|r| r[b])
    }

    /// Row a: (column, value), columns ascending.
    pub fn row(&self, a: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.rows[a]
            .cells
            .iter()
            .filter_map(|(b, v)| v.map(|v| (*b, v)))
    }

    /// Column a: (row, value), rows ascending.
    pub fn col(&self, a: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.cols[a]
            .iter()
            .filter_map(move |b| self.rows[*b][a].map(|v| (*b, v)))
    }

    /// The values of a NIC's links other than to itself: its row (as sender) and its
    /// column (as peer).
    pub fn links_of(&self, a: usize) -> Vec<f64> {
        self.row(a)
            .chain(self.col(a))
            .filter(|(b, _)| *b != a)
            .map(|(_, v)| v)
            .collect()
    }

    /// Every cell (row, column, value), row-major.
    pub fn entries(&self) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        (0..self.rows.len()).flat_map(move |a| self.row(a).map(move |(b, v)| (a, b, v)))
    }

    /// Every value, row-major.
    pub fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.entries().map(|(_, _, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The sparse matrix reads as the dense one it replaces, whatever the cells.
        #[test]
        fn reads_as_the_dense_matrix(n in 1usize..12, cells in proptest::collection::vec((0usize..12, 0usize..12, proptest::option::of(0.0f64..10.0)), 0..60)) {
            let mut dense = vec![vec![None; n]; n];
            for &(a, b, v) in &cells {
                if a < n && b < n && v.is_some() {
                    dense[a][b] = v;
                }
            }
            let m = LinkMatrix::new(n, cells.clone());
            prop_assert_eq!(m.len(), n);
            for a in 0..n {
                for b in 0..n {
                    prop_assert_eq!(m[a][b], dense[a][b]);
                    prop_assert_eq!(m.get(a, b), dense[a][b]);
                }
                let row: Vec<(usize, f64)> = (0..n).filter_map(|b| dense[a][b].map(|v| (b, v))).collect();
                prop_assert_eq!(m.row(a).collect::<Vec<_>>(), row);
                let col: Vec<(usize, f64)> = (0..n).filter_map(|b| dense[b][a].map(|v| (b, v))).collect();
                prop_assert_eq!(m.col(a).collect::<Vec<_>>(), col);
                let mut mine: Vec<f64> = (0..n).filter(|b| *b != a).flat_map(|b| [dense[a][b], dense[b][a]]).flatten().collect();
                let mut got = m.links_of(a);
                mine.sort_by(f64::total_cmp);
                got.sort_by(f64::total_cmp);
                prop_assert_eq!(got, mine);
            }
            let all: Vec<(usize, usize, f64)> = (0..n).flat_map(|a| (0..n).map(move |b| (a, b))).filter_map(|(a, b)| dense[a][b].map(|v| (a, b, v))).collect();
            prop_assert_eq!(m.entries().collect::<Vec<_>>(), all);
        }
    }
}
