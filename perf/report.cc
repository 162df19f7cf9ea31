#include "perf/report.h"

#include <cstdio>

namespace weft::perf {

std::string fitNumber(double value, int width) {
  // Digits left of the decimal point (0 below 1).
  int digits = 0;
  for (double bound = 1; value >= bound && digits < 40; bound *= 10) ++digits;
  char buf[64];
  if (digits < width - 2) {
    std::snprintf(buf, sizeof buf, "%*.2f", width, value);
  } else if (digits < width - 1) {
    std::snprintf(buf, sizeof buf, "%*.1f", width, value);
  } else if (digits < width + 1) {
    std::snprintf(buf, sizeof buf, "%*.0f", width, value);
  } else if (width >= 7) {
    std::snprintf(buf, sizeof buf, "%*.1e", width, value);
  } else {
    std::snprintf(buf, sizeof buf, "%*.0e", width, value);
  }
  return buf;
}

void printTableHeader(bool cputime, bool roofline) {
  const char* t = cputime ? "cputime" : "time";
  std::printf("#\n");
  std::printf(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place%s\n", "",
      "", "", "", "", roofline ? "          roofline" : "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "size",
              "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw",
              "#wrong");
  if (roofline) std::printf("  %7s  %5s  %5s", "bound", "frac", "frac");
  std::printf("\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "");
  if (roofline) std::printf("  %7s  %5s  %5s", "(us)", "(oop)", "(ip)");
  std::printf("\n");
}

void printRowStart(size_t bytes, size_t count, const char* type, const char* op, int root) {
  std::printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, type, op, root);
}

void printRowPlacement(double usec, double algBw, double busBw, int64_t wrong) {
  // Below 1 us a third decimal (nccl-tests keeps two, its calls take microseconds): host calls
  // of 0.05-0.5 us would otherwise be rounded by up to 10%.
  std::string t = fitNumber(usec, 7), a = fitNumber(algBw, 6), b = fitNumber(busBw, 6);
  if (usec < 0.9995) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%7.3f", usec);
    t = buf;
  }
  if (wrong >= 0) {
    std::printf("  %7s  %6s  %6s  %6g", t.c_str(), a.c_str(), b.c_str(),
                static_cast<double>(wrong));
  } else {
    std::printf("  %7s  %6s  %6s    N/A", t.c_str(), a.c_str(), b.c_str());
  }
}

void printRooflineCells(double boundUs, double outOfPlace, double inPlace) {
  std::printf("  %7s  %5.3f  %5.3f", fitNumber(boundUs, 7).c_str(), outOfPlace, inPlace);
}

void printRowEnd() {
  std::printf("\n");
  std::fflush(stdout);
}

void printFooter(int errors, double avgBusBw, double minBw, const char* program) {
  std::printf("# %-20s : %d %s\n", "Out of bounds values", errors, errors ? "FAILED" : "OK");
  const char* verdict = minBw < 0 ? "" : (avgBusBw < 0.9 * minBw ? "FAILED" : "OK");
  std::printf("# %-20s : %g %s\n", "Avg bus bandwidth", avgBusBw, verdict);
  std::printf("#\n");
  std::printf("# Collective test concluded: %s\n", program);
  std::fflush(stdout);
}

}  // namespace weft::perf
