//! A linear layer's f32 product on the CPU, `x·Wᵀ`, through gemm into memory nothing filled
//! first. candle's product fills its output with zeros, which gemm then overwrites: for the
//! encoder's layers, a pass over megabytes of fresh memory per product. The bias is added in
//! place afterwards (`kernels::bias_in_place`), as for the bf16 and int8 products: handing it
//! to gemm as the output's starting value would round differently once gemm splits a long
//! sum, and the floats are candle's to the bit.

use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};
use gemm::Parallelism;

use crate::kernels;

/// `xs·Wᵀ` for `xs` `[rows, inputs]` and `weight` `[outputs, inputs]`, both f32 on the CPU:
/// `[rows, outputs]`.
pub(crate) fn linear(xs: &Tensor, weight: &Tensor) -> candle_core::Result<Tensor> {
    xs.apply_op2_no_bwd(weight, &Linear)
}

struct Linear;

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
        let (outputs, inputs) = weight_layout.shape().dims2()?;
        let (xs, rows) = kernels::product_inputs(xs, xs_layout, (outputs, inputs), self.name())?;
        let weight = kernels::contiguous(weight, weight_layout, self.name())?;
        let size = rows * outputs;
        if inputs == 0 || size == 0 {
            return Ok((
                CpuStorage::F32(vec![0.0; size]),
                Shape::from((rows, outputs)),
            ));
        }
        let threads = rayon::current_num_threads();
        let parallelism = if threads > 1 {
            Parallelism::Rayon(threads)
        } else {
            Parallelism::None
        };
        let stride = |n: usize| isize::try_from(n).expect("a tensor's stride fits an isize");
        let mut out = Vec::with_capacity(size);
        // SAFETY: `xs` holds `rows · inputs` values (checked by `product_inputs`), read as rows
        // of `inputs`; `weight` holds `outputs · inputs` (its layout's shape), read transposed,
        // row j of W as column j; `out` has room for `rows · outputs`, written row-major, and
        // gemm writes every one of them (`inputs` > 0) before the length covers them, reading
        // none (`read_dst` false).
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
        Ok((CpuStorage::F32(out), Shape::from((rows, outputs))))
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

    /// The same floats as candle's product, for shapes that leave gemm's blocks partly filled
    /// and sums long enough for gemm to split.
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
            let product = xs.matmul(&weight.t()?)?;
            assert_eq!(
                linear(&xs, &weight)?.to_vec2::<f32>()?,
                product.to_vec2::<f32>()?
            );
        }
        Ok(())
    }

    #[test]
    fn no_rows_or_no_inputs_give_zeros() -> candle_core::Result<()> {
        let weight = Tensor::zeros((4, 0), candle_core::DType::F32, &Device::Cpu)?;
        let xs = Tensor::zeros((2, 0), candle_core::DType::F32, &Device::Cpu)?;
        assert_eq!(linear(&xs, &weight)?.to_vec2::<f32>()?, [[0f32; 4]; 2]);
        let none = Tensor::zeros((0, 3), candle_core::DType::F32, &Device::Cpu)?;
        let weight = Tensor::zeros((4, 3), candle_core::DType::F32, &Device::Cpu)?;
        assert_eq!(linear(&none, &weight)?.dims(), [0, 4]);
        Ok(())
    }

    #[test]
    fn inputs_of_another_width_are_refused() -> candle_core::Result<()> {
        let weight = Tensor::zeros((4, 3), candle_core::DType::F32, &Device::Cpu)?;
        let xs = Tensor::zeros((2, 5), candle_core::DType::F32, &Device::Cpu)?;
        assert!(linear(&xs, &weight).is_err());
        Ok(())
    }
}
