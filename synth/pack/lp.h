// A small dense primal simplex for  max c.x  s.t.  A x <= b, x >= 0  with b >= 0 (the slack
// basis is feasible, no phase one), that keeps its tableau so columns can be added and the
// problem re-optimized: the master problem of column generation. Bland's rule, so degenerate
// rows (b = 0) cannot make it cycle.
#pragma once
#include <vector>

namespace weft::synth {

class PackingLp {
 public:
  // `b`: right-hand sides (>= 0), one per row.
  explicit PackingLp(std::vector<double> b);

  // Adds a variable with objective coefficient `c` and column `a` (one entry per row); returns
  // its index. The current basis stays feasible.
  int addColumn(double c, const std::vector<double>& a);

  // Pivots to an optimum (or until `maxPivots`); returns the objective value. Throws
  // weft::Error(kInvalidArgument) when the problem is unbounded. `steepest`: enter the column
  // of the most negative reduced cost (Bland's rule only after 50 degenerate pivots in a row).
  double solve(int maxPivots = 100000, bool steepest = false);

  double value(int column) const;     // the variable's value at the current basis
  std::vector<double> duals() const;  // one per row, >= 0 at an optimum
  int rows() const { return m_; }

 private:
  void pivot(int row, int col);

  int m_;
  // Tableau column-major: cols_[j][i] for i < m_ (B^-1 a_j), reduced costs in red_[j]. Slack
  // columns come first (j < m_), so they hold B^-1 itself.
  std::vector<std::vector<double>> cols_;
  std::vector<double> red_;
  std::vector<double> cost_;
  std::vector<double> rhs_;
  std::vector<int> basis_;  // per row: basic column
  double objective_ = 0;
};

}  // namespace weft::synth
