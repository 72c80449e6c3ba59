// Embeds splitdec: loads a model directory, asks about an image (when one is
// given) and streams the reply, then asks a follow-up on the same cache.
//
//   chat_example MODEL_DIR [IMAGE.npy]
#include <iostream>
#include <splitdec/splitdec.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR [IMAGE.npy]\n";
    return 2;
  }
  try {
    auto engine = splitdec::Engine::load(argv[1]);
    splitdec::Conversation chat(engine);
    const std::string image = argc > 2 ? " <image:" + std::string(argv[2]) + ">" : "";
    chat.append_user_turn("What is in this picture?" + image);
    splitdec::GenerateOptions options;
    options.max_new_tokens = 12;
    std::cout << "model: ";
    chat.generate(options, [](const std::string& piece) { std::cout << piece << std::flush; });
    std::cout << "\n(cache holds " << chat.length() << " positions)\n";
    chat.append_user_turn("Say it again.");
    std::cout << "model: ";
    chat.generate(options, [](const std::string& piece) { std::cout << piece << std::flush; });
    std::cout << "\n(cache holds " << chat.length() << " positions)\n";
  } catch (const splitdec::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
