/* A library that exports a symbol outside nccl*, pnccl* and tutti*: the fixture that proves
 * tools/check_symbols.sh can fail (test check_symbols_detects). Never linked into anything. */
__attribute__((visibility("default"))) int tt_leaked_symbol(void);

__attribute__((visibility("default"))) int tt_leaked_symbol(void) { return 42; }
