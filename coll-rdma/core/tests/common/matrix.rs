//! 2x2 matrices of wrapping u64 under the product: the fabric tests' op
//! that is not commutative, so a fold out of rank order gives a wrong
//! result rather than the same one.

use coll_rdma_core::reduction::Reduction;

pub type Matrix = [u64; 4];

pub fn matrix_product(a: Matrix, b: Matrix) -> Matrix {
    let mul = |x: u64, y: u64| x.wrapping_mul(y);
    [
        mul(a[0], b[0]).wrapping_add(mul(a[1], b[2])),
        mul(a[0], b[1]).wrapping_add(mul(a[1], b[3])),
        mul(a[2], b[0]).wrapping_add(mul(a[3], b[2])),
        mul(a[2], b[1]).wrapping_add(mul(a[3], b[3])),
    ]
}

/// The matrix in the first 32 bytes of `bytes` (little-endian words).
pub fn read_matrix(bytes: &[u8]) -> Matrix {
    let mut m = [0; 4];
    for (slot, chunk) in m.iter_mut().zip(bytes.chunks_exact(8)) {
        *slot = super::word(chunk);
    }
    m
}

pub fn write_matrix(bytes: &mut [u8], m: Matrix) {
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(m) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
}

/// The product with the lower rank's matrix on the left.
pub struct MatrixProduct;

impl Reduction for MatrixProduct {
    fn element_size(&self) -> usize {
        32
    }
    fn is_commutative(&self) -> bool {
        false
    }
    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        for (low, high) in lower.chunks_exact(32).zip(higher.chunks_exact_mut(32)) {
            let product = matrix_product(read_matrix(low), read_matrix(high));
            write_matrix(high, product);
        }
    }
}

/// `len` bytes of little-endian words drawn from `rng`, for matrices (when
/// `matrix`) small ones, which keep the products readable in a failure
/// message.
pub fn random_words(rng: &mut super::XorShift, len: usize, matrix: bool) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    for chunk in bytes.chunks_exact_mut(8) {
        let value = if matrix { rng.next() % 5 } else { rng.next() };
        chunk.copy_from_slice(&value.to_le_bytes());
    }
    bytes
}

/// The serial left-to-right fold of `inputs` (in rank order), never
/// through `Reduction::combine`: the matrix product when `matrix`, else
/// the wrapping word sum.
pub fn serial_fold(matrix: bool, inputs: impl IntoIterator<Item = Vec<u8>>) -> Vec<u8> {
    let mut inputs = inputs.into_iter();
    let mut acc = inputs.next().unwrap_or_default();
    for next in inputs {
        if matrix {
            for (a, n) in acc.chunks_exact_mut(32).zip(next.chunks_exact(32)) {
                write_matrix(a, matrix_product(read_matrix(a), read_matrix(n)));
            }
        } else {
            for (a, n) in acc.chunks_exact_mut(8).zip(next.chunks_exact(8)) {
                a.copy_from_slice(&super::word(a).wrapping_add(super::word(n)).to_le_bytes());
            }
        }
    }
    acc
}
