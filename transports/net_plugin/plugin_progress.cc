#include "transports/net_plugin/plugin_progress.h"

namespace weft::netplugin {
namespace {

// Sleeps between passes: short while connections move or wait on the plugin (many plugins make
// progress only when called), long while all are idle (a control byte or a wake() still ends
// it at once; setup deadlines are checked at least this often); connections count as busy for
// a while after they last moved.
constexpr remote::ProgressPacing kPacing{
    std::chrono::milliseconds(1), std::chrono::milliseconds(20), std::chrono::milliseconds(200)};

}  // namespace

ProgressThread& ProgressThread::get() { return perProcess<ProgressThread>(); }

ProgressThread::ProgressThread() : remote::ProgressThread("net plugin", kPacing) { start(); }

}  // namespace weft::netplugin
