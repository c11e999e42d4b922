#!/usr/bin/env bash
# Builds every libFuzzer target (fuzz/libfuzzer/fuzz_*.cpp) the way OSS-Fuzz and ClusterFuzzLite
# build fuzzers, and puts in $OUT what those services look for there:
#   $OUT/<target>                     the fuzz target, linked with $LIB_FUZZING_ENGINE
#   $OUT/<target>_seed_corpus.zip     its committed corpus (fuzz/corpus/<target>/), flat
#   $OUT/<target>.dict                its dictionary, where it has one (fuzz/libfuzzer/<target>.dict)
#   $OUT/<target>.options             its libFuzzer options, where it has them (max_len)
# The build takes its compilers and flags from the environment, as those services set it:
#   CC, CXX               clang and clang++ (libFuzzer needs clang)
#   CFLAGS, CXXFLAGS      sanitizer and coverage flags, e.g. -fsanitize=address,fuzzer-no-link
#   LIB_FUZZING_ENGINE    what links a target with its engine, e.g. -fsanitize=fuzzer
#   OUT                   where the targets go
#   WORK                  where the build goes (default: $OUT/../logprobs-fuzz-work)
#   LOGPROBS_FUZZ_CMAKE_ARGS  more configure arguments (e.g. -DCMAKE_PREFIX_PATH=... for
#                         dependencies built with the same flags; .clusterfuzzlite/build.sh)
# No optimization or sanitizer flag of its own is added (CMAKE_BUILD_TYPE=None); the backends
# build without OpenMP (the services' clang has no OpenMP runtime, and a fuzzer must run where
# only its own binary is); only the targets and what they link are built, so the build needs
# Eigen, fmt, Highway and nlohmann-json, not the test and command-line libraries.
# ci/fuzz runs this script too, with the same variables.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
for variable in CC CXX LIB_FUZZING_ENGINE OUT; do
  if [[ -z ${!variable:-} ]]; then
    echo "fuzz/build.sh: \$$variable is not set (e.g. CC=clang CXX=clang++ LIB_FUZZING_ENGINE=-fsanitize=fuzzer OUT=/out)" >&2
    exit 2
  fi
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
work=${WORK:-$OUT/../logprobs-fuzz-work}
mkdir -p "$work"
build=$(cd "$work" && pwd)/logprobs-fuzz-build

targets=()
for source in "$root"/fuzz/libfuzzer/fuzz_*.cpp; do
  targets+=("$(basename "$source" .cpp)")
done

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
# A build folder configured by another generator cannot be reused.
if [[ -f $build/CMakeCache.txt ]] && ! grep -q "CMAKE_GENERATOR:INTERNAL=${generator[1]:-Unix Makefiles}\$" "$build/CMakeCache.txt"; then
  rm -rf "$build"
fi
# shellcheck disable=SC2086  # LOGPROBS_FUZZ_CMAKE_ARGS is a list of arguments
cmake -S "$root" -B "$build" "${generator[@]}" \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="${CFLAGS:-}" -DCMAKE_CXX_FLAGS="${CXXFLAGS:-}" -DCMAKE_BUILD_TYPE=None \
  -DLOGPROBS_BUILD_LIBFUZZER=ON -DLOGPROBS_FUZZING_ENGINE="$LIB_FUZZING_ENGINE" \
  -DLOGPROBS_BUILD_TESTS=OFF -DLOGPROBS_BUILD_CHECK=OFF -DLOGPROBS_BUILD_BENCH=OFF -DLOGPROBS_CUDA=OFF -DLOGPROBS_OPENMP=OFF \
  ${LOGPROBS_FUZZ_CMAKE_ARGS:-} >"$work/configure.log" || { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$build" --target "${targets[@]}" --parallel "$(nproc)"

for target in "${targets[@]}"; do
  cp "$build/fuzz/libfuzzer/$target" "$OUT/$target"
  rm -f "$OUT/${target}_seed_corpus.zip"
  if [[ -d $root/fuzz/corpus/$target ]]; then
    (cd "$root/fuzz/corpus/$target" && zip -q -X "$OUT/${target}_seed_corpus.zip" ./*)
  fi
  for extra in dict options; do
    if [[ -f $root/fuzz/libfuzzer/$target.$extra ]]; then
      cp "$root/fuzz/libfuzzer/$target.$extra" "$OUT/$target.$extra"
    fi
  done
done
echo "fuzz/build.sh: ${targets[*]} in $OUT"
