#!/bin/bash -eu
# ClusterFuzzLite's (and OSS-Fuzz's) build step, run in the image of the Dockerfile beside this
# file with the services' compilers and flags. The fuzzers must link statically and be built
# against libc++ with the sanitizer's instrumentation throughout, so fmt and Highway are built
# here with the same $CC, $CXX, $CFLAGS and $CXXFLAGS first; then fuzz/build.sh, the script that
# ci/fuzz runs too, builds every target into $OUT with its seed corpus and dictionary.
deps=$WORK/deps
common=(-G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX"
        -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" -DBUILD_SHARED_LIBS=OFF
        -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$deps")
cmake -S "$SRC/fmt" -B "$WORK/fmt-build" "${common[@]}" -DFMT_TEST=OFF -DFMT_DOC=OFF
cmake --build "$WORK/fmt-build" --target install
cmake -S "$SRC/highway" -B "$WORK/highway-build" "${common[@]}" -DBUILD_TESTING=OFF -DHWY_ENABLE_TESTS=OFF \
      -DHWY_ENABLE_EXAMPLES=OFF -DHWY_ENABLE_CONTRIB=OFF -DHWY_ENABLE_INSTALL=ON
cmake --build "$WORK/highway-build" --target install

LOGPROBS_FUZZ_CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$deps" "$SRC/logprobs-harness/fuzz/build.sh"
