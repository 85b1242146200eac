//! Reads a safetensors file one tensor at a time, when the model asks for it.
//!
//! candle's memory-mapped loader copies every tensor out of the mapping, and the mapped pages it
//! read stay resident until the mapping goes: loading BGE-large (1.3 GB) peaked at twice its
//! size. Reading all tensors up front and converting them afterwards holds both forms at once
//! (f32 and packed bf16). Read on demand, each tensor is converted and the file's copy let go
//! before the next: the peak is the loaded model plus one layer.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use serde::Deserialize;

use crate::{EmbedError, Result};

/// One entry of the JSON header.
#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    /// Start and end in the data that follows the header.
    data_offsets: (usize, usize),
}

/// An open safetensors file and its header; tensors are read as they are asked for.
pub(crate) struct Safetensors {
    path: PathBuf,
    file: Mutex<fs_err::File>,
    /// Floating-point tensors by name, with their stored type. Others (older checkpoints keep
    /// `position_ids` as I64) are not weights and are left out.
    entries: HashMap<String, (DType, Entry)>,
    data_start: u64,
}

impl Safetensors {
    /// Opens the file at `path` and reads its header.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let mut file = fs_err::File::open(path).map_err(|e| unreadable(path, e.into()))?;
        let mut length = [0u8; 8];
        file.read_exact(&mut length)
            .map_err(|e| unreadable(path, e.into()))?;
        let header_length = usize::try_from(u64::from_le_bytes(length))
            .ok()
            .filter(|&n| n <= 100 << 20)
            .ok_or_else(|| EmbedError::BadFile {
                path: path.to_owned(),
                reason: "not a safetensors file (header length)".into(),
            })?;
        let mut header = vec![0u8; header_length];
        file.read_exact(&mut header)
            .map_err(|e| unreadable(path, e.into()))?;
        let mut entries: HashMap<String, serde_json::Value> =
            serde_json::from_slice(&header).map_err(|e| unreadable(path, e.into()))?;
        entries.remove("__metadata__");
        let entries = entries
            .into_iter()
            .map(|(name, value)| Ok((name, serde_json::from_value::<Entry>(value)?)))
            .collect::<Result<Vec<_>, serde_json::Error>>()
            .map_err(|e| unreadable(path, e.into()))?
            .into_iter()
            .filter_map(|(name, entry)| {
                let stored = match entry.dtype.as_str() {
                    "F32" => DType::F32,
                    "F16" => DType::F16,
                    "BF16" => DType::BF16,
                    _ => return None,
                };
                Some((name, (stored, entry)))
            })
            .collect::<HashMap<_, _>>();
        // A damaged header is refused here, before it can ask for a buffer of any size.
        let data_length = file
            .metadata()
            .map_err(|e| unreadable(path, e.into()))?
            .len()
            .saturating_sub(8 + header_length as u64);
        for (name, (stored, entry)) in &entries {
            let (start, end) = entry.data_offsets;
            let size = entry.shape.iter().product::<usize>() * stored.size_in_bytes();
            if start > end || end as u64 > data_length || end - start != size {
                return Err(EmbedError::BadFile {
                    path: path.to_owned(),
                    reason: format!("tensor `{name}` lies outside the file or has the wrong size"),
                });
            }
        }
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
            entries,
            data_start: 8 + header_length as u64,
        })
    }

    /// The tensor `name`, converted to `dtype` on `device`.
    pub(crate) fn read(&self, name: &str, dtype: DType, device: &Device) -> Result<Tensor> {
        let bad_tensor = |source| EmbedError::BadTensor {
            path: self.path.clone(),
            name: name.to_owned(),
            source: Box::new(source),
        };
        let (stored, entry) = self.entries.get(name).ok_or_else(|| {
            bad_tensor(candle_core::Error::CannotFindTensor {
                path: name.to_owned(),
            })
        })?;
        let (start, end) = entry.data_offsets;
        let mut bytes = vec![0u8; end - start];
        {
            // Poisoned only by a panic during a read; every read seeks first, so the handle is
            // still usable.
            let mut file = self
                .file
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            file.seek(SeekFrom::Start(self.data_start + start as u64))
                .and_then(|_| file.read_exact(&mut bytes))
                .map_err(|e| bad_tensor(e.into()))?;
        }
        Tensor::from_raw_buffer(&bytes, *stored, &entry.shape, &Device::Cpu)
            .and_then(|t| t.to_dtype(dtype))
            .and_then(|t| t.to_device(device))
            .map_err(bad_tensor)
    }
}

fn unreadable(path: &Path, source: Box<dyn std::error::Error + Send + Sync>) -> EmbedError {
    EmbedError::Unreadable {
        path: path.to_owned(),
        source,
    }
}

/// candle's errors carry a message rather than a source, so the whole chain goes in it.
fn into_candle(error: &EmbedError) -> candle_core::Error {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    candle_core::Error::Msg(message)
}

impl SimpleBackend for Safetensors {
    fn get(
        &self,
        shape: Shape,
        name: &str,
        _: candle_nn::Init,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        // Checked against the header, before any bytes are read.
        if let Some((_, entry)) = self.entries.get(name)
            && entry.shape != shape.dims()
        {
            return Err(candle_core::Error::UnexpectedShape {
                msg: format!("shape mismatch for `{name}` in {}", self.path.display()),
                expected: shape,
                got: entry.shape.clone().into(),
            });
        }
        self.get_unchecked(name, dtype, device)
    }

    fn get_unchecked(
        &self,
        name: &str,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        self.read(name, dtype, device).map_err(|e| into_candle(&e))
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use candle_nn::VarBuilder;

    use super::*;

    #[test]
    fn reads_what_candle_writes_in_the_asked_type() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        let a = Tensor::new(&[[1.5f32, -2.0], [0.25, 4.0]], &Device::Cpu).unwrap();
        let b = Tensor::new(&[7.0f32, 8.0, 9.0], &Device::Cpu).unwrap();
        let ids = Tensor::new(&[0i64, 1, 2], &Device::Cpu).unwrap();
        candle_core::safetensors::save(
            &HashMap::from([
                ("a".to_owned(), a.clone()),
                ("b.c".to_owned(), b.clone()),
                ("position_ids".to_owned(), ids),
            ]),
            &path,
        )
        .unwrap();
        let file = Safetensors::open(&path).unwrap();
        assert!(file.contains_tensor("a") && file.contains_tensor("b.c"));
        assert!(!file.contains_tensor("position_ids"), "not a weight");
        let a_back = file.read("a", DType::F16, &Device::Cpu).unwrap();
        assert_eq!(a_back.dtype(), DType::F16);
        let a_back: Vec<Vec<f32>> = a_back.to_dtype(DType::F32).unwrap().to_vec2().unwrap();
        assert_eq!(a_back, a.to_vec2::<f32>().unwrap());

        // Through candle's builder, as the model loads: names under a prefix, shapes checked.
        let vb = VarBuilder::from_backend(Box::new(file), DType::F32, Device::Cpu);
        let b_back: Vec<f32> = vb.pp("b").get(3, "c").unwrap().to_vec1().unwrap();
        assert_eq!(b_back, b.to_vec1::<f32>().unwrap());
        let error = vb.get((3, 1), "a").unwrap_err().to_string();
        assert!(error.contains("shape mismatch for `a`"), "{error}");
        let error = vb.get(2, "missing").unwrap_err().to_string();
        assert!(
            error.contains("cannot read tensor `missing`")
                && error.contains("cannot find tensor missing"),
            "{error}"
        );

        // Cut short, the file no longer holds its last tensor: refused at open, not at read.
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() - 4]).unwrap();
        let error = Safetensors::open(&path).err().unwrap().to_string();
        assert!(error.contains("lies outside the file"), "{error}");

        std::fs::write(&path, b"not safetensors at all").unwrap();
        let error = Safetensors::open(&path).err().unwrap();
        assert!(error.to_string().contains("model.safetensors"), "{error}");
    }
}
