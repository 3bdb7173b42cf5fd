// HierarchyChoice: which all-reduce a communicator that spans hosts runs for a
// message of a given size, the hierarchical one (shared memory inside each host,
// Gloo across) or the flat one (Gloo's ring over every rank), chosen by measuring
// both: the hierarchical path wins where the network is the bottleneck, and can
// lose where the link is as fast as the copies it adds.
//
// Sizes fall in classes of a factor of 4 (SizeClass). In auto mode, the first
// 2 x kSamples all-reduces of a class alternate hierarchical, flat, hierarchical,
// ...; each rank times its own calls. With the class's last sample, Record() hands
// back this rank's median time of each path; the caller sums both over the ranks
// (one small flat all-reduce, at the same call on every rank) and Decide() settles
// the class on the flat path if its sum is smaller by more than kFlatMargin, else
// on the hierarchical one (a near tie is noise, and the hierarchical path puts
// fewer bytes on the network, so it suffers less from other traffic there). Every rank sees the same sequence of
// all-reduces (collectives are agreed) and the same sums, so all ranks always run
// the same path: results stay identical across ranks. A forced mode
// (HVD_HIERARCHICAL_ALLREDUCE=1 or 0) always gives its path and measures nothing.
//
// Not thread-safe: the backend calls it from its one executing thread.
#ifndef HVD_RUNTIME_TRANSPORT_HIERARCHY_CHOICE_H_
#define HVD_RUNTIME_TRANSPORT_HIERARCHY_CHOICE_H_

#include <cstdint>
#include <map>
#include <vector>

namespace hvd {

class HierarchyChoice {
 public:
  enum class Path { kHierarchical, kFlat };
  enum class Mode { kAuto, kHierarchical, kFlat };
  static constexpr int kSamples = 5;  // per path and class
  static constexpr double kFlatMargin = 0.05;

  explicit HierarchyChoice(Mode mode = Mode::kAuto) : mode_(mode) {}

  // floor(log4(bytes)), 0 for bytes < 4.
  static int SizeClass(int64_t bytes);

  // The path of the next all-reduce of `bytes`.
  Path Next(int64_t bytes) const;

  // Records that an all-reduce of `bytes` on `path` took `seconds`. Returns true
  // when that was the class's last sample: local[0], local[1] then hold this
  // rank's median seconds on the hierarchical and the flat path, to be summed over
  // the ranks and passed to Decide().
  bool Record(int64_t bytes, Path path, double seconds, double local[2]);

  // Settles the class of `bytes`: flat if its summed median is below the
  // hierarchical one's by more than kFlatMargin, else hierarchical.
  Path Decide(int64_t bytes, const double summed[2]);

  // Whether the class of `bytes` is settled (always, in a forced mode), and on what.
  bool Settled(int64_t bytes, Path* path) const;

 private:
  struct Class {
    std::vector<double> hierarchical, flat;
    bool settled = false;
    Path chosen = Path::kHierarchical;
  };
  Mode mode_;
  std::map<int, Class> classes_;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_HIERARCHY_CHOICE_H_
