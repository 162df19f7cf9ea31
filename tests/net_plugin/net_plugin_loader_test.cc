// Loading external network plugins (transports/net_plugin/loader.h): NCCL's naming rules, the
// newest version Weft speaks, and broken plugins refused with a reason instead of a crash.
#include <gtest/gtest.h>

#include <string>

#include "src/common/tuning.h"
#include "transports/net_plugin/loader.h"
#include "transports/registry.h"

using weft::netplugin::NetPlugin;

namespace {

TEST(NetPluginLoader, LoadsWeftsOwnPluginAtV11) {
  std::string why;
  auto p = NetPlugin::load(WEFT_NET_PLUGIN_PATH, &why);
  ASSERT_NE(p, nullptr) << why;
  EXPECT_EQ(p->name(), "Weft");
  EXPECT_EQ(p->version(), 11);
  EXPECT_GE(p->devices(), 1);
  EXPECT_EQ(p->path(), WEFT_NET_PLUGIN_PATH);
}

TEST(NetPluginLoader, ListTriesEachNameInTurn) {
  std::string why;
  auto p = NetPlugin::load(std::string("no-such-plugin, ") + WEFT_NET_PLUGIN_PATH, &why);
  ASSERT_NE(p, nullptr) << why;
  EXPECT_EQ(p->name(), "Weft");
}

TEST(NetPluginLoader, MissingLibraryNamesBothFilesTried) {
  std::string why;
  EXPECT_EQ(NetPlugin::load("no-such-plugin", &why), nullptr);
  EXPECT_NE(why.find("libnccl-net-no-such-plugin.so"), std::string::npos) << why;
  EXPECT_NE(why.find("no-such-plugin:"), std::string::npos) << why;
}

TEST(NetPluginLoader, NoneLoadsNothing) {
  std::string why;
  EXPECT_EQ(NetPlugin::load("none", &why), nullptr);
  EXPECT_EQ(NetPlugin::load("", &why), nullptr);
  EXPECT_EQ(weft::netplugin::pluginFor("none"), nullptr);
  EXPECT_EQ(weft::netplugin::pluginFor("NONE"), nullptr);
}

TEST(NetPluginLoader, BrokenPluginsAreRefusedWithTheReason) {
  struct Case {
    const char* path;
    const char* reason;
  } cases[] = {
      {BAD_PLUGIN_OLD_ONLY_PATH, "neither ncclNetPlugin_v11 nor ncclNetPlugin_v10"},
      {BAD_PLUGIN_INIT_FAILS_PATH, "init() of plugin Bad failed"},
      {BAD_PLUGIN_NO_TEST_PATH, "has no test function"},
  };
  for (const Case& c : cases) {
    std::string why;
    EXPECT_EQ(NetPlugin::load(c.path, &why), nullptr) << c.path;
    EXPECT_NE(why.find(c.reason), std::string::npos) << why;
  }
}

// The transport follows the loader: enabled with a plugin that loads (and NCCL_NET empty or
// naming it), never with a broken one, so Weft keeps its own transports.
TEST(NetPluginLoader, TransportEnabledOnlyWithAWorkingPlugin) {
  weft::transport::Transport* plugin = nullptr;
  for (auto* t : weft::transport::transports())
    if (std::string(t->name()) == "net-plugin") plugin = t;
  ASSERT_NE(plugin, nullptr);
  weft::Tuning t;
  EXPECT_FALSE(plugin->enabled(t));
  t.netPlugin = BAD_PLUGIN_INIT_FAILS_PATH;
  EXPECT_FALSE(plugin->enabled(t));
  t.netPlugin = WEFT_NET_PLUGIN_PATH;
  EXPECT_TRUE(plugin->enabled(t));
  t.net = "weft";
  EXPECT_TRUE(plugin->enabled(t));
  t.net = "socket";
  EXPECT_FALSE(plugin->enabled(t));
}

}  // namespace
