//! A linear layer's f32 product on the CPU, `x·Wᵀ` or `x·Wᵀ + b`, through gemm into memory
//! nothing filled first. candle's product fills its output with zeros, which gemm then
//! overwrites: for the encoder's layers, a pass over megabytes of fresh memory (page faults
//! included) per product; and candle adds a bias into yet another new tensor. A profile of
//! MiniLM in f32 on AVX2 put the two at about 6% of the run. Here the bias is added in place,
//! after the product: handing it to gemm as the output's starting value would round
//! differently once gemm splits a long sum, and the floats are candle's to the bit.

use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Shape, Tensor};
use gemm::Parallelism;
use rayon::prelude::*;

use crate::kernels;

/// `xs·Wᵀ (+ bias)` for `xs` `[rows, inputs]`, `weight` `[outputs, inputs]` and `bias`
/// `[outputs]`, all f32 on the CPU: `[rows, outputs]`.
pub(crate) fn linear(
    xs: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
) -> candle_core::Result<Tensor> {
    match bias {
        Some(bias) => xs.apply_op3_no_bwd(weight, bias, &Linear),
        None => xs.apply_op2_no_bwd(weight, &Linear),
    }
}

struct Linear;

impl Linear {
    fn run(
        xs: (&CpuStorage, &Layout),
        weight: (&CpuStorage, &Layout),
        bias: Option<(&CpuStorage, &Layout)>,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        const NAME: &str = "f32-linear";
        let (outputs, inputs) = weight.1.shape().dims2()?;
        let (xs, rows) = kernels::product_inputs(xs.0, xs.1, (outputs, inputs), NAME)?;
        let weight = kernels::contiguous(weight.0, weight.1, NAME)?;
        let bias = bias
            .map(|(storage, layout)| kernels::contiguous(storage, layout, NAME))
            .transpose()?;
        if bias.is_some_and(|bias| bias.len() != outputs) {
            candle_core::bail!(
                "a bias of {} for {outputs} outputs",
                bias.map_or(0, <[f32]>::len)
            );
        }
        let size = rows * outputs;
        if inputs == 0 {
            let out = bias.map_or_else(|| vec![0.0; size], |bias| bias.repeat(rows));
            return Ok((CpuStorage::F32(out), Shape::from((rows, outputs))));
        }
        let mut out = Vec::with_capacity(size);
        let threads = rayon::current_num_threads();
        let parallelism = if threads > 1 {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        };
        let stride = |n: usize| isize::try_from(n).expect("a tensor's stride fits an isize");
        if size > 0 {
            // SAFETY: `xs` holds `rows · inputs` values (checked by `product_inputs`), read as
            // rows of `inputs`; `weight` holds `outputs · inputs` (its layout's shape), read
            // transposed, row j of W as column j; `out` has room for `rows · outputs`, written
            // row-major, and gemm writes every one of them (`inputs` > 0) before the length
            // covers them, reading none (`read_dst` false).
            #[allow(unsafe_code)]
            unsafe {
                gemm::gemm(
                    rows,
                    outputs,
                    inputs,
                    out.as_mut_ptr(),
                    1,
                    stride(outputs),
                    false,
                    xs.as_ptr(),
                    1,
                    stride(inputs),
                    weight.as_ptr(),
                    stride(inputs),
                    1,
                    1.0,
                    1.0,
                    false,
                    false,
                    false,
                    parallelism,
                );
                out.set_len(size);
            }
        }
        if let Some(bias) = bias {
            out.par_chunks_mut(outputs * rows.div_ceil(threads).max(1))
                .for_each(|rows| {
                    for row in rows.chunks_exact_mut(outputs) {
                        for (x, b) in row.iter_mut().zip(bias) {
                            *x += b;
                        }
                    }
                });
        }
        Ok((CpuStorage::F32(out), Shape::from((rows, outputs))))
    }
}

impl CustomOp2 for Linear {
    fn name(&self) -> &'static str {
        "f32-linear"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        weight: &CpuStorage,
        weight_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Self::run((xs, xs_layout), (weight, weight_layout), None)
    }
}

impl CustomOp3 for Linear {
    fn name(&self) -> &'static str {
        "f32-linear-bias"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xs_layout: &Layout,
        weight: &CpuStorage,
        weight_layout: &Layout,
        bias: &CpuStorage,
        bias_layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Self::run(
            (xs, xs_layout),
            (weight, weight_layout),
            Some((bias, bias_layout)),
        )
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 1000) as f32 / 500.0
                    - 1.0
            })
            .collect()
    }

    /// The same floats as candle's product and its bias added after, for shapes that leave
    /// gemm's blocks partly filled and sums long enough for gemm to split.
    #[test]
    fn products_equal_candles_to_the_bit() -> candle_core::Result<()> {
        for (rows, inputs, outputs) in [
            (1, 3, 5),
            (37, 384, 1152),
            (29, 1536, 384),
            (130, 64, 17),
            (4, 1, 9),
        ] {
            let xs = Tensor::from_vec(values(rows * inputs, 1), (rows, inputs), &Device::Cpu)?;
            let weight =
                Tensor::from_vec(values(outputs * inputs, 2), (outputs, inputs), &Device::Cpu)?;
            let bias = Tensor::from_vec(values(outputs, 3), outputs, &Device::Cpu)?;
            let product = xs.matmul(&weight.t()?)?;
            let ours = linear(&xs, &weight, None)?;
            assert_eq!(ours.to_vec2::<f32>()?, product.to_vec2::<f32>()?);
            let with_bias = linear(&xs, &weight, Some(&bias))?;
            let theirs = product.broadcast_add(&bias)?;
            assert_eq!(with_bias.to_vec2::<f32>()?, theirs.to_vec2::<f32>()?);
        }
        Ok(())
    }

    #[test]
    fn no_rows_or_no_inputs_give_zeros_or_the_bias() -> candle_core::Result<()> {
        let weight = Tensor::zeros((4, 0), candle_core::DType::F32, &Device::Cpu)?;
        let xs = Tensor::zeros((2, 0), candle_core::DType::F32, &Device::Cpu)?;
        let bias = Tensor::new(&[1f32, 2., 3., 4.], &Device::Cpu)?;
        assert_eq!(
            linear(&xs, &weight, None)?.to_vec2::<f32>()?,
            [[0f32; 4]; 2]
        );
        assert_eq!(
            linear(&xs, &weight, Some(&bias))?.to_vec2::<f32>()?,
            [[1f32, 2., 3., 4.]; 2]
        );
        let none = Tensor::zeros((0, 3), candle_core::DType::F32, &Device::Cpu)?;
        let weight = Tensor::zeros((4, 3), candle_core::DType::F32, &Device::Cpu)?;
        assert_eq!(linear(&none, &weight, None)?.dims(), [0, 4]);
        Ok(())
    }
}
