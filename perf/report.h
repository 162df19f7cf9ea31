// The nccl-tests text format: header, table rows and footer, byte for byte where it matters to
// the scripts that parse it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::perf {

// `value` printed in exactly `width` columns: two decimals while the integer part leaves room,
// then one, then none, then exponent notation (nccl-tests' rule).
std::string fitNumber(double value, int width);

// The three header lines of the results table (cputime instead of time with -C); with
// `roofline`, the three roofline columns after the in-place ones (printRooflineCells).
void printTableHeader(bool cputime, bool roofline = false);
// size, count, type, redop, root.
void printRowStart(size_t bytes, size_t count, const char* type, const char* op, int root);
// time (us), algbw, busbw, #wrong for one placement; wrong < 0 prints N/A.
void printRowPlacement(double usec, double algBw, double busBw, int64_t wrong);
// The roofline columns on device memory: the memory-traffic bound of the out-of-place call (us)
// and the fraction of it each placement reached (perf/roofline.h).
void printRooflineCells(double boundUs, double outOfPlace, double inPlace);
void printRowEnd();
// "# Out of bounds values", "# Avg bus bandwidth", "#", "# Collective test concluded".
// minBw < 0: no bandwidth check.
void printFooter(int errors, double avgBusBw, double minBw, const char* program);

}  // namespace weft::perf
