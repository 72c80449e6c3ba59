# Turns a text file into a C++ source defining `const char* const NAME`.
# Usage: cmake -DIN=... -DOUT=... -DNAME=... -P embed_text.cmake
file(READ "${IN}" content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE "${OUT}" "namespace splitdec {\nstatic const char kBytes[] = {${bytes} 0};\nextern const char* const ${NAME};\nconst char* const ${NAME} = kBytes;\n}\n")
