//! Self-attention on the CPU over packed rows: each text's tokens one after another, no padding,
//! every text attending to its own tokens only. Each (text, head) pair is one task: its scores
//! `scale · Q·Kᵀ` (a square of the text's length) in a buffer of its own, the softmax row by row,
//! then `P·V`. The products read Q, K and V where the QKV projection left them (gemm takes any
//! strides), so nothing is transposed or copied, and no score tensor for the whole batch exists.

use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};
use gemm::Parallelism;
use rayon::prelude::*;

use crate::kernels;

/// The attention context `[tokens, width]` of `qkv` `[tokens, 3 · width]` (query, key and value
/// side by side, as the stacked projection gives them) for texts of `lengths` tokens packed one
/// after another, over `heads` heads.
pub(crate) fn packed_attention(
    qkv: &Tensor,
    lengths: &[usize],
    heads: usize,
) -> candle_core::Result<Tensor> {
    qkv.apply_op1_no_bwd(&PackedAttention { lengths, heads })
}

struct PackedAttention<'a> {
    lengths: &'a [usize],
    heads: usize,
}

impl CustomOp1 for PackedAttention<'_> {
    fn name(&self) -> &'static str {
        "packed-attention"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (tokens, three_widths) = layout.shape().dims2()?;
        let width = three_widths / 3;
        if three_widths % 3 != 0 || self.heads == 0 || width % self.heads != 0 {
            candle_core::bail!("{three_widths} QKV columns for {} heads", self.heads);
        }
        if self.lengths.iter().sum::<usize>() != tokens {
            candle_core::bail!("texts of {:?} tokens in {tokens} rows", self.lengths);
        }
        let qkv = kernels::contiguous(storage, layout, self.name())?;
        let head = Head {
            width,
            head_width: width / self.heads,
        };
        let starts: Vec<usize> = self
            .lengths
            .iter()
            .scan(0, |next, &length| {
                let start = *next;
                *next += length;
                Some(start)
            })
            .collect();
        let contexts: Vec<Vec<f32>> = (0..self.lengths.len() * self.heads)
            .into_par_iter()
            .map(|task| {
                let (text, index) = (task / self.heads, task % self.heads);
                let rows = &qkv[starts[text] * three_widths..][..self.lengths[text] * three_widths];
                head.context(rows, self.lengths[text], index)
            })
            .collect();
        let mut out = vec![0f32; tokens * width];
        let mut texts: Vec<&mut [f32]> = Vec::with_capacity(self.lengths.len());
        let mut rest = out.as_mut_slice();
        for &length in self.lengths {
            let (text, after) = rest.split_at_mut(length * width);
            texts.push(text);
            rest = after;
        }
        texts
            .into_par_iter()
            .zip(contexts.par_chunks(self.heads))
            .for_each(|(text, contexts)| {
                for (index, context) in contexts.iter().enumerate() {
                    let column = index * head.head_width;
                    for (row, values) in text
                        .chunks_exact_mut(width)
                        .zip(context.chunks_exact(head.head_width))
                    {
                        row[column..column + head.head_width].copy_from_slice(values);
                    }
                }
            });
        Ok((CpuStorage::F32(out), Shape::from((tokens, width))))
    }
}

/// One head's shape within the rows.
#[derive(Clone, Copy)]
struct Head {
    width: usize,
    head_width: usize,
}

impl Head {
    /// Head `index`'s context `[length, head_width]` for one text's `rows` (`[length, 3 · width]`).
    fn context(self, rows: &[f32], length: usize, index: usize) -> Vec<f32> {
        let Self { width, head_width } = self;
        let qkv_row = stride(3 * width);
        assert_eq!(rows.len(), length * 3 * width);
        let column = index * head_width;
        assert!(column + head_width <= width);
        let scale = (head_width as f32).sqrt().recip();
        let mut scores = vec![0f32; length * length];
        let mut context = vec![0f32; length * head_width];
        if length == 0 {
            return context;
        }
        // SAFETY: queries are `rows[i · 3w + column + d]` and keys `rows[j · 3w + w + column + d]`
        // for i, j < length and d < head_width, all inside `rows` (asserted above); `scores` is
        // length × length, written row-major. gemm only reads through the input pointers.
        #[allow(unsafe_code)]
        unsafe {
            gemm::gemm(
                length,
                length,
                head_width,
                scores.as_mut_ptr(),
                1,
                stride(length),
                false,
                rows[column..].as_ptr(),
                1,
                qkv_row,
                rows[width + column..].as_ptr(),
                qkv_row,
                1,
                0.0,
                scale,
                false,
                false,
                false,
                Parallelism::None,
            );
        }
        kernels::softmax_rows(&mut scores, length);
        // SAFETY: probabilities are `scores[i · length + j]`, values `rows[j · 3w + 2w + column +
        // d]`, inside `rows` as above; `context` is length × head_width, written row-major.
        #[allow(unsafe_code)]
        unsafe {
            gemm::gemm(
                length,
                head_width,
                length,
                context.as_mut_ptr(),
                1,
                stride(head_width),
                false,
                scores.as_ptr(),
                1,
                stride(length),
                rows[2 * width + column..].as_ptr(),
                1,
                qkv_row,
                0.0,
                1.0,
                false,
                false,
                false,
                Parallelism::None,
            );
        }
        context
    }
}

/// A row stride for gemm: every stride here is a row's length within a slice, and no slice
/// holds more than `isize::MAX` bytes.
fn stride(values: usize) -> isize {
    isize::try_from(values).expect("a row within a slice")
}

#[cfg(test)]
mod tests {
    use candle_core::{D, Device, IndexOp, Tensor};

    use super::packed_attention;
    use crate::kernels::tests::max_difference;

    /// Against candle's own attention, text by text, head by head.
    #[test]
    fn matches_attention_text_by_text() {
        let (heads, head_width) = (3, 8);
        let width = heads * head_width;
        let lengths = [5, 1, 17, 0, 2];
        let tokens: usize = lengths.iter().sum();
        let qkv = Tensor::randn(0f32, 1.0, (tokens, 3 * width), &Device::Cpu).unwrap();
        let ours = packed_attention(&qkv, &lengths, heads).unwrap();
        assert_eq!(ours.dims(), [tokens, width]);
        let mut start = 0;
        for &length in lengths.iter().filter(|&&length| length > 0) {
            for head in 0..heads {
                let part = |which: usize| {
                    qkv.i((start..start + length, which * width + head * head_width..))
                        .unwrap()
                        .narrow(1, 0, head_width)
                        .unwrap()
                };
                let (query, key, value) = (part(0), part(1), part(2));
                let scores = (query.matmul(&key.t().unwrap()).unwrap()
                    * (head_width as f64).sqrt().recip())
                .unwrap();
                let expected = candle_nn::ops::softmax(&scores, D::Minus1)
                    .unwrap()
                    .matmul(&value)
                    .unwrap();
                let got = ours
                    .i((
                        start..start + length,
                        head * head_width..(head + 1) * head_width,
                    ))
                    .unwrap();
                let difference = max_difference(&got, &expected);
                assert!(
                    difference < 1e-5,
                    "text at {start}, head {head}: {difference}"
                );
            }
            start += length;
        }
        assert!(packed_attention(&qkv, &lengths[..2], heads).is_err());
    }
}
