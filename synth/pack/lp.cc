#include "synth/pack/lp.h"

#include <cmath>
#include <string>

#include "src/common/error.h"

namespace weft::synth {
namespace {
constexpr double kEps = 1e-10;
}

PackingLp::PackingLp(std::vector<double> b) : m_(static_cast<int>(b.size())), rhs_(std::move(b)) {
  for (int i = 0; i < m_; ++i) {
    if (!(rhs_[i] >= 0))
      throw Error(Status::kInvalidArgument,
                  "packing LP: row " + std::to_string(i) + " has a negative right-hand side");
    std::vector<double> e(m_, 0.0);
    e[i] = 1;
    cols_.push_back(std::move(e));
    red_.push_back(0);
    cost_.push_back(0);
    basis_.push_back(i);
  }
}

int PackingLp::addColumn(double c, const std::vector<double>& a) {
  if (static_cast<int>(a.size()) != m_)
    throw Error(Status::kInvalidArgument, "packing LP: column has " + std::to_string(a.size()) +
                                              " entries for " + std::to_string(m_) + " rows");
  // B^-1 a from the slack columns, and the reduced cost y.a - c with y = c_B B^-1.
  std::vector<double> col(m_, 0.0);
  for (int k = 0; k < m_; ++k) {
    if (a[k] == 0) continue;
    for (int i = 0; i < m_; ++i) col[i] += cols_[k][i] * a[k];
  }
  double r = -c;
  for (int k = 0; k < m_; ++k) r += red_[k] * a[k];  // red_ of slack k is y_k
  cols_.push_back(std::move(col));
  red_.push_back(r);
  cost_.push_back(c);
  return static_cast<int>(cols_.size()) - m_ - 1;
}

void PackingLp::pivot(int row, int col) {
  const double p = cols_[col][row];
  const int ncols = static_cast<int>(cols_.size());
  std::vector<double> pr(ncols);  // the pivot row, scaled
  for (int j = 0; j < ncols; ++j) pr[j] = cols_[j][row] / p;
  const double prhs = rhs_[row] / p;
  std::vector<double> f(m_);  // multiples of the pivot row to remove from each row
  for (int i = 0; i < m_; ++i) f[i] = cols_[col][i];
  const double fr = red_[col];
  for (int j = 0; j < ncols; ++j) {
    auto& cj = cols_[j];
    const double v = pr[j];
    if (v != 0)
      for (int i = 0; i < m_; ++i)
        if (i != row && f[i] != 0) cj[i] -= f[i] * v;
    cj[row] = v;
    red_[j] -= fr * v;
  }
  for (int i = 0; i < m_; ++i)
    if (i != row) rhs_[i] = std::max(0.0, rhs_[i] - f[i] * prhs);
  rhs_[row] = prhs;
  basis_[row] = col;
}

double PackingLp::solve(int maxPivots, bool steepest) {
  int degenerate = 0;  // pivots in a row that did not move (Bland's rule takes over after 50)
  for (int it = 0; it < maxPivots; ++it) {
    // Bland: the lowest-index improving column, then the lowest-index basic leaving variable.
    // Steepest: the most negative reduced cost (far fewer pivots), Bland while degenerate.
    int enter = -1;
    const bool bland = !steepest || degenerate >= 50;
    for (int j = 0; j < static_cast<int>(cols_.size()); ++j)
      if (red_[j] < -kEps && (enter < 0 || (!bland && red_[j] < red_[enter]))) {
        enter = j;
        if (bland) break;
      }
    if (enter < 0) break;
    int leave = -1;
    double bestRatio = 0;
    for (int i = 0; i < m_; ++i) {
      const double a = cols_[enter][i];
      if (a <= kEps) continue;
      const double ratio = rhs_[i] / a;
      if (leave < 0 || ratio < bestRatio - kEps ||
          (ratio <= bestRatio + kEps && basis_[i] < basis_[leave]))
        leave = i, bestRatio = ratio;
    }
    if (leave < 0) throw Error(Status::kInvalidArgument, "packing LP: unbounded");
    degenerate = bestRatio <= kEps ? degenerate + 1 : 0;
    pivot(leave, enter);
  }
  double obj = 0;
  for (int i = 0; i < m_; ++i) obj += cost_[basis_[i]] * rhs_[i];
  objective_ = obj;
  return obj;
}

double PackingLp::value(int column) const {
  const int j = column + m_;
  for (int i = 0; i < m_; ++i)
    if (basis_[i] == j) return rhs_[i];
  return 0;
}

std::vector<double> PackingLp::duals() const {
  return std::vector<double>(red_.begin(), red_.begin() + m_);
}

}  // namespace weft::synth
