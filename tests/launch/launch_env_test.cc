// What every task of a Slurm step derives alike: the first host of the step's node list and the
// rendezvous port.
#include "src/api/launch_env.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace weft::api::launchenv {
namespace {

TEST(FirstSlurmHost, NamesTheFirstHostOfTheList) {
  EXPECT_EQ(firstSlurmHost("login"), "login");
  EXPECT_EQ(firstSlurmHost("localhost,other"), "localhost");
  EXPECT_EQ(firstSlurmHost("node[07-09,12],gpu1"), "node07");
  EXPECT_EQ(firstSlurmHost("node[12,3-4]"), "node12");
  EXPECT_EQ(firstSlurmHost("node[001-128]"), "node001");  // zero padding kept
  EXPECT_EQ(firstSlurmHost("rack[2-3]n[5,8]-ib"), "rack2n5-ib");
  EXPECT_EQ(firstSlurmHost("a-[1-3]"), "a-1");
  EXPECT_EQ(firstSlurmHost("n[4]"), "n4");
}

TEST(FirstSlurmHost, MalformedListsGiveNothing) {
  EXPECT_EQ(firstSlurmHost(""), "");
  EXPECT_EQ(firstSlurmHost("node[01-04"), "");
  EXPECT_EQ(firstSlurmHost("node]1"), "");
  EXPECT_EQ(firstSlurmHost("node[]"), "");
  EXPECT_EQ(firstSlurmHost("node[x-y]"), "");
}

TEST(SlurmPort, SameStepSamePortInRange) {
  EXPECT_EQ(slurmPort("4711", "0"), slurmPort("4711", "0"));
  std::set<uint16_t> ports;
  for (int job = 1000; job < 1020; ++job)
    for (int step = 0; step < 5; ++step) {
      uint16_t p = slurmPort(std::to_string(job), std::to_string(step));
      EXPECT_GE(p, kSlurmPortBase);
      EXPECT_LT(p, kSlurmPortBase + kSlurmPortSpan);
      ports.insert(p);
    }
  // Steps of one job and neighbouring jobs spread over the range (100 draws from 4000 ports).
  EXPECT_GT(ports.size(), 90u);
  // "1.23" and "12.3" are different steps.
  EXPECT_NE(slurmPort("1", "23"), slurmPort("12", "3"));
}

}  // namespace
}  // namespace weft::api::launchenv
