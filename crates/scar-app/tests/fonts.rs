//! Hindi and Japanese in the window: egui's bundled fonts have neither script, and the window's
//! system font provider (eframe's `system_fonts`, which the app enables) asks the system
//! (fontconfig here) for a font for each character they lack. scripts/test installs a
//! Devanagari and a Japanese font.

use std::sync::Arc;

use egui_system_font_provider::SystemFontProvider;

const HINDI: &str = "सीमा पर टूटे हुए प्रमाण को पड़ोसी खंड से जोड़ा जाता है।";
const JAPANESE: &str = "境界で分断された証拠を、隣接するチャンクから取り戻します。";

/// Whether `ctx`'s fonts have every glyph of `text`, after one pass has laid it out (which is
/// when a provider is asked).
fn draws(ctx: &egui::Context, text: &str) -> bool {
    let mut output = ctx.run_ui(egui::RawInput::default(), |ui| {
        ui.label(text);
    });
    output.textures_delta.clear(); // No renderer here to upload the glyphs to.
    let font = egui::FontId::proportional(14.0);
    ctx.fonts_mut(|fonts| fonts.has_glyphs(&font, text))
}

#[test]
fn hindi_and_japanese_are_drawn_with_the_systems_fonts() {
    let bundled = egui::Context::default();
    assert!(!draws(&bundled, HINDI) && !draws(&bundled, JAPANESE));
    let window = egui::Context::default();
    window.add_font_provider(Arc::new(SystemFontProvider::new()));
    let found = [HINDI, JAPANESE].map(|text| draws(&window, text));
    if found != [true, true] {
        assert!(
            std::env::var_os("SCAR_REQUIRE_TOOLS").is_none(),
            "no system font for Hindi or Japanese ({found:?}): install fonts-lohit-deva and \
             fonts-ipafont-gothic (scripts/test does)"
        );
        eprintln!("skipped: no system font for Hindi or Japanese");
    }
}
