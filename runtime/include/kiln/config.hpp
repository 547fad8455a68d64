// What every public kiln header checks first: the language it needs (C++20), said in one message.
#pragma once

// kiln's headers use C++20 (concepts, std::span, designated initializers). Compiled as C++17 they fail
// with dozens of parser errors deep inside them; this says why instead, and stops the compile (a missing
// include is fatal in g++, clang and nvcc's preprocessor, where #error alone would let the parse go on).
#if !defined(__cplusplus) || __cplusplus < 202002L
#error "kiln needs C++20: compile with -std=c++20 (Meson: cpp_std=c++20, and cuda_std=c++20 for files nvcc compiles)"
#include <kiln_needs_cxx20__compile_with_std_cxx20>
#endif
