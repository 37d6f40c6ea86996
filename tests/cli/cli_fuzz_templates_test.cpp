// The cluster templates of tools/fuzz/ run as written, with stand-ins for mlasim (and srun): each
// passes --resume, --ignore-known and a quoted shard and --out, ends successfully on mlasim's
// exits 0, 1 and 4 (so nothing restarts on new findings) and fails on 2 and 3.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

fs::path Tmp(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("mlasim_tmpl_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string Read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream b;
  b << f.rdbuf();
  return b.str();
}

// The shell script in a Kubernetes template: the literal block after "- |" under args.
std::string K8sScript(const fs::path& yaml) {
  std::istringstream in(Read(yaml));
  std::string line, script;
  bool inside = false;
  size_t indent = 0;
  while (std::getline(in, line)) {
    if (!inside) {
      inside = line.find("- |") != std::string::npos && line.find_first_not_of(' ') != 0;
      continue;
    }
    if (indent == 0) indent = line.find_first_not_of(' ');
    if (line.find_first_not_of(' ') < indent) break;
    script += line.substr(indent) + '\n';
  }
  return script;
}

struct StubRun {
  int code;
  std::string args;  // what the stand-in mlasim received
};

// Runs `command` in `dir` with a stand-in mlasim (and srun) on PATH that exits `rc`.
StubRun RunWithStub(const fs::path& dir, const std::string& command, int rc) {
  const fs::path bin = dir / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "mlasim") << "#!/bin/sh\nprintf '%s\\n' \"$@\" > '" << (dir / "args").string()
                                << "'\nexit " << rc << "\n";
  std::ofstream(bin / "srun") << "#!/bin/sh\nwhile [ \"$1\" != bash ]; do shift; done\n"
                                 "SLURM_PROCID=3 SLURM_LOCALID=3 SLURM_NTASKS=8 exec \"$@\"\n";
  fs::permissions(bin / "mlasim", fs::perms::owner_all);
  fs::permissions(bin / "srun", fs::perms::owner_all);
  fs::remove(dir / "args");
  const std::string sh = "cd '" + dir.string() + "' && PATH='" + bin.string() +
                         "':\"$PATH\" MLASIM_BIN=mlasim MLASIM_SEED=7 SLURM_ARRAY_TASK_ID=2 "
                         "SLURM_ARRAY_TASK_COUNT=64 SLURM_CPUS_PER_TASK=8 JOB_COMPLETION_INDEX=5 " +
                         command + " > /dev/null 2>&1";
  const int status = std::system(sh.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Read(dir / "args")};
}

void ExpectTemplate(const std::string& name, const std::string& command, const std::string& shard,
                    const std::string& out, bool gpu) {
  const fs::path dir = Tmp(name);
  for (int rc : {0, 1, 4, 2, 3}) {
    const StubRun r = RunWithStub(dir, command, rc);
    EXPECT_EQ(r.code, rc == 2 || rc == 3 ? rc : 0) << name << " on mlasim exit " << rc;
    for (const std::string& want : std::vector<std::string>{
             "--resume\n", "--ignore-known\n", "--shard\n" + shard + "\n", "--out\n" + out + "\n"})
      EXPECT_NE(r.args.find(want), std::string::npos) << name << " lacks " << want << r.args;
    EXPECT_EQ(r.args.find("--gpu\nsentinel\n--device\n") != std::string::npos, gpu) << r.args;
  }
  EXPECT_TRUE(fs::is_directory(dir / out)) << name << " creates its --out";
  fs::remove_all(dir);
}

const fs::path kTools = fs::path(MLASIM_SOURCE_DIR) / "tools" / "fuzz";

TEST(FuzzTemplates, SlurmCpu) {
  ExpectTemplate("slurm", "bash '" + (kTools / "slurm.sbatch").string() + "'", "2/64", "findings/2",
                 false);
}

TEST(FuzzTemplates, SlurmGpuOneShardPerGpu) {
  // Array task 2 of 64, local task 3 of 8: shard 2*8+3 of 64*8 on GPU 3.
  ExpectTemplate("slurmgpu", "bash '" + (kTools / "slurm-gpu.sbatch").string() + "'", "19/512",
                 "findings/19", true);
  const fs::path dir = Tmp("slurmgpu_dev");
  const StubRun r = RunWithStub(dir, "bash '" + (kTools / "slurm-gpu.sbatch").string() + "'", 0);
  EXPECT_NE(r.args.find("--device\n3\n"), std::string::npos) << r.args;
  fs::remove_all(dir);
}

TEST(FuzzTemplates, KubernetesCpuAndGpu) {
  for (const char* f : {"k8s-indexed-job.yaml", "k8s-indexed-job-gpu.yaml"}) {
    const std::string script = K8sScript(kTools / f);
    ASSERT_NE(script.find("mlasim fuzz"), std::string::npos) << f;
    const fs::path dir = Tmp(std::string("k8s_script_") + f);
    std::ofstream(dir / "job.sh") << script;
    // The pod's /findings is a folder of the test here.
    std::string local = Read(dir / "job.sh");
    for (size_t at; (at = local.find("/findings/")) != std::string::npos;)
      local.replace(at, 10, "findings/");
    std::ofstream(dir / "job.sh") << local;
    ExpectTemplate(std::string("k8s_") + f, "sh '" + (dir / "job.sh").string() + "'", "5/64",
                   "findings/5", std::string(f).find("gpu") != std::string::npos);
    fs::remove_all(dir);
  }
}

}  // namespace
