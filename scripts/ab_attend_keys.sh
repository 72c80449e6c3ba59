#!/usr/bin/env bash
# A/B of the decode-attention kernel: the simd_vector.inc of an older
# revision (default HEAD~1) against the working tree's, in one process,
# alternated (bench/ab/ab_attend_keys.cpp). Both tables, f32/bf16/f16/q8 KV.
#   scripts/ab_attend_keys.sh [REV] [CONTEXT] [HEAD_DIM]
# AB=matvec runs the decode matvec row kernels instead (bench/ab/ab_matvec.cpp;
# ROWS=4 for four x rows per call, a batched decode; TYPES picks weight types
# among f32 bf16 f16 q4);
# NEW_FLAGS adds compiler flags to the working tree's build (-D variants).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD~1} ctx=${2:-16384} hd=${3:-256}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
git show "$rev:src/kernels/simd/simd_vector.inc" > "$out/old.inc"
cp src/kernels/simd/simd_vector.inc "$out/new.inc"
flags=(-O2 -std=c++20 -Isrc -Iinclude)
avx512=(-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c -Wno-uninitialized)
avx2=(-mavx2 -mfma -mf16c)
for v in old new; do
  for isa in avx512 avx2; do
    w=16; [ "$isa" = avx2 ] && w=8
    printf '#define SIMD_WIDTH %s\n#define SIMD_NS %s_%s\n#define SIMD_NAME "%s_%s"\n#define SIMD_TABLE %s_%s_table\n#include "%s/%s.inc"\n' \
      "$w" "$v" "$isa" "$v" "$isa" "$v" "$isa" "$out" "$v" > "$out/${v}_$isa.cpp"
    declare -n isa_flags=$isa
    extra=(); [ "$v" = new ] && extra=(${NEW_FLAGS:-})
    g++ "${flags[@]}" "${isa_flags[@]}" "${extra[@]}" -c "$out/${v}_$isa.cpp" -o "$out/${v}_$isa.o"
  done
done
tables=(avx2)
grep -q avx512f /proc/cpuinfo && tables=(avx512 avx2)
if [ "${AB:-attend}" = matvec ]; then
  g++ "${flags[@]}" bench/ab/ab_matvec.cpp "$out"/*.o -lpthread -o "$out/ab"
  for isa in "${tables[@]}"; do
    for w in ${TYPES:-f32 bf16 f16 q4}; do
      "$out/ab" "$w" "$isa"
    done
  done
  exit 0
fi
g++ "${flags[@]}" bench/ab/ab_attend_keys.cpp "$out"/*.o -lpthread -o "$out/ab"
for isa in "${tables[@]}"; do
  for kv in f32 bf16 f16 q8; do
    "$out/ab" "$ctx" "$hd" "$kv" "$isa"
  done
done
