// splitdec embed-media: the post-projector rows a media file gives the
// decoder (float32 [n, hidden] .npy), for checking the frontends against
// other tools.
#include <filesystem>

#include "cli_common.h"
#include "core/npy.h"

namespace splitdec::cli {

namespace {

struct EmbedFlags {
  std::string model, mmproj, image, audio, out;
  int image_tokens = 0;
  bool pan_and_scan = false;
};

int run(const EmbedFlags& f) {
  if (f.image.empty() == f.audio.empty()) throw InputError("embed-media: give exactly one of --image or --audio");
  const std::string& path = f.image.empty() ? f.audio : f.image;
  if (!std::filesystem::is_regular_file(path))
    throw InputError((f.image.empty() ? "--audio " : "--image ") + path + ": no such file");
  if (!f.audio.empty() && f.image_tokens != 0) throw InputError("--image-tokens applies to --image");
  if (!f.audio.empty() && f.pan_and_scan) throw InputError("--pan-and-scan applies to --image");
  const auto engine = load_engine(f.model, "", f.mmproj);
  const MediaRows rows = engine->embed_media(path, f.image.empty() ? Modality::Audio : Modality::Image,
                                             media_options(f.image_tokens, f.pan_and_scan));
  write_npy(f.out, {rows.rows, rows.hidden}, rows.data.data());
  std::fprintf(stderr, "%s: %lld rows of %d (%s)\n", f.out.c_str(), static_cast<long long>(rows.rows), rows.hidden,
               engine->describe_media().c_str());
  return 0;
}

}  // namespace

void add_embed_media(CLI::App& app, std::function<int()>& run_fn) {
  auto* cmd = app.add_subcommand("embed-media", "write the rows an image or audio file gives the decoder, as .npy");
  auto f = std::make_shared<EmbedFlags>();
  cmd->add_option("-m,--model", f->model, "model directory")->required();
  add_mmproj_option(*cmd, f->mmproj);
  cmd->add_option("--image", f->image, "an image file (PNG, JPEG)");
  cmd->add_option("--audio", f->audio, "an audio file (WAV, FLAC; 16 kHz)");
  cmd->add_option("--image-tokens", f->image_tokens,
                  "Gemma-4 soft tokens: 70, 140, 280, 560, 1120 (default: the model's)")
      ->transform(integer_in(0, INT32_MAX));
  cmd->add_flag("--pan-and-scan", f->pan_and_scan,
                "Gemma-3: the original's rows, then each pan-and-scan crop's (HF's do_pan_and_scan)");
  cmd->add_option("--out", f->out, "the .npy file to write (float32 [n, hidden])")->required();
  cmd->callback([f, &run_fn] { run_fn = [f] { return run(*f); }; });
}

}  // namespace splitdec::cli
