// fuzz/kut_pool.h CutReason: the reasons the campaign summary counts decode calls by ("most often
// N: skipped: WHY") are whole up to 400 characters; a longer one (a kernel library's answer can be
// any length) is cut at a blank and marked.
#include <gtest/gtest.h>

#include <string>

#include "fuzz/kut_pool.h"

namespace mlasim::fuzz {
namespace {

TEST(CutReason, WholeUpToTheLimit) {
  EXPECT_EQ(CutReason(""), "");
  const std::string at(400, 'x');
  EXPECT_EQ(CutReason(at), at);  // the limit itself
  const std::string fold =
      "a head-folded plan (fold ratio 8): the kernel walks aiter's work_info in the folded view, "
      "the harness lays q out unfolded";
  EXPECT_EQ(CutReason(fold), fold);  // the harness's longest reason (cut at 120 once)
}

TEST(CutReason, OnePastTheLimitIsCutAtABlank) {
  std::string words;
  while (words.size() < 401) words += "word ";
  words.resize(401);
  const std::string cut = CutReason(words);
  EXPECT_LE(cut.size(), 400u);
  ASSERT_GE(cut.size(), 3u);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  EXPECT_EQ(cut, words.substr(0, words.rfind(' ', 397)) + "...");  // ends on a whole word
  EXPECT_EQ(cut.substr(cut.size() - 7), "word...");
}

TEST(CutReason, NoBlankIsCutAt397) {
  const std::string run(1000, 'y');
  EXPECT_EQ(CutReason(run), std::string(397, 'y') + "...");
  EXPECT_EQ(CutReason(" " + std::string(500, 'z')), " " + std::string(396, 'z') + "...");
}

}  // namespace
}  // namespace mlasim::fuzz
