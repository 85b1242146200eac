//! The bf16 CPU mode against f32, on a real model.

use scar_embed::{DeviceChoice, EmbedError, EmbedOptions, Embedder, ModelFiles, Precision};

fn load(precision: Precision) -> Result<Embedder, EmbedError> {
    let dir = scar_test_support::models_dir().join("all-MiniLM-L6-v2");
    let files =
        ModelFiles::from_dir("all-MiniLM-L6-v2", dir).expect("run scripts/fetch-test-models");
    Embedder::load(&files, &EmbedOptions::new(DeviceChoice::Cpu, precision))
}

#[test]
fn bf16_vectors_agree_with_f32() {
    let bf16 = match load(Precision::Bf16) {
        Ok(model) => model,
        Err(EmbedError::PrecisionUnavailable { .. }) => {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        Err(other) => panic!("{other}"),
    };
    let f32 = load(Precision::F32).unwrap();
    assert_eq!(bf16.precision(), Precision::Bf16);
    assert_eq!(f32.precision(), Precision::F32);
    let long = "The receiver acknowledges every segment it accepts. ".repeat(30);
    let texts = [
        "tcp",
        "What does the controller owe the data subject?",
        long.as_str(),
    ];
    let ours = bf16.embed_passages(&texts, &mut |_| {}).unwrap();
    let exact = f32.embed_passages(&texts, &mut |_| {}).unwrap();
    for i in 0..texts.len() {
        let cosine: f32 = ours
            .row(i)
            .iter()
            .zip(exact.row(i))
            .map(|(a, b)| a * b)
            .sum();
        assert!(cosine >= 0.999, "text {i}: cosine {cosine}");
        assert!(
            ours.row(i) != exact.row(i),
            "text {i}: bf16 gave f32's vector exactly"
        );
    }
}

#[test]
fn f16_on_the_cpu_is_a_clear_error() {
    let error = load(Precision::F16).unwrap_err();
    assert!(error.to_string().contains("GPU only"), "{error}");
}
