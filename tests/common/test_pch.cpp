// The translation unit that builds the suites' precompiled header (tests/CMakeLists.txt).
