// python/baton/torch/_work.cpp: the thin C++ layer of the torch.distributed backend "baton" (issue 10 allows C++
// for this layer only; baton's C core is underneath, reached through baton._baton's capsule, baton_capi.h).
//
// What it does: the backend's asynchronous all-reduce (DDP's gradient buckets) returns a c10d::Work written in
// C++ whose torch future a C++ thread completes. The Python route (baton/torch/c10d.py without this module)
// makes a torch.futures.Future, a Python Work subclass and a queue entry per call, and a Python waiter thread
// takes the GIL to complete each future (converting the result list back to an IValue); DDP's reducer then calls
// the Python get_future() through torch's trampoline. Here the reducer calls getFuture() in C++, and the
// completing thread waits for baton's work and marks the future complete without Python or the GIL.
//
// The group's front (Group below): the process group torch.distributed and DDP's reducer hold is a C++
// c10d::ProcessGroup that owns the Python group (baton/torch/c10d.py's ProcessGroupBaton). A Python group is
// reached through torch's pybind11 trampoline: every bucket all-reduce of DDP took the GIL, built Python
// objects for the tensor list and the options and ran the Python method, about 0.1-0.2 ms a call of the
// training thread inside a step (caches cold after the layers' matmuls). The front runs DDP's steady-state
// all-reduce in C++ (a tensor seen before whose attach decision is made, contiguous CPU tensors, an op baton
// has) and hands everything else to the Python group's methods, with the GIL: other collectives, the first
// calls with each tensor (the Python group moves DDP's bucket into shared memory and attaches it there), the
// inline modes.
//
// Built only when Debian's libtorch-dev headers are present (Makefile: TORCH_EXT); baton/torch/c10d.py falls
// back to the Python route when the module is missing or BATON_TORCH_WORK=python (BATON_TORCH_GROUP=python:
// the C++ Work behind the Python group, without the front).
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "baton/comm.h"  // the dtype names only: the library is called through the capsule
#include "baton_capi.h"

namespace py = pybind11;

namespace {

const baton_capi *g_capi = nullptr;

class BatonWork : public c10d::Work {
 public:
  explicit BatonWork(std::vector<at::Tensor> tensors)
      : c10d::Work(-1, c10d::OpType::ALLREDUCE), tensors_(std::move(tensors)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  std::vector<at::Tensor> result() override { return tensors_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Called once, by the completing thread.
  void complete(const std::string &error) {
    if (error.empty()) {
      future_->markCompleted(c10::IValue(tensors_));
      finish();
    } else {
      auto e = std::make_exception_ptr(std::runtime_error(error));
      future_->setError(e);
      finish(e);
    }
  }

 private:
  std::vector<at::Tensor> tensors_;  // keeps the memory baton works on alive until the all-reduce is done
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

struct Pending {
  std::vector<void *> works;
  std::string error;  // a start failure already known
  c10::intrusive_ptr<BatonWork> work;
};

// One completing thread per process, started on first use: waits for baton's works in the order they were
// started (the order baton finishes them), then completes their torch futures.
class Completer {
 public:
  void push(Pending p) {
    std::lock_guard<std::mutex> g(mu_);
    if (!started_) {
      std::thread(&Completer::run, this).detach();  // detached: it only ever waits; ends with the process
      started_ = true;
    }
    q_.push_back(std::move(p));
    cv_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      Pending p;
      {
        std::unique_lock<std::mutex> g(mu_);
        cv_.wait(g, [this] { return !q_.empty(); });
        p = std::move(q_.front());
        q_.pop_front();
      }
      std::string error = p.error;
      for (void *w : p.works) {
        int rc = g_capi->wait(w);
        if (rc < 0 && error.empty()) {
          char msg[512];
          g_capi->describe(rc, "baton: asynchronous all-reduce", msg, sizeof msg);
          error = msg;
        }
      }
      p.work->complete(error);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> q_;
  bool started_ = false;
};

Completer *g_completer = nullptr;  // never freed: the detached thread uses it until the process ends

int baton_dtype_of(const at::Tensor &t) {
  switch (t.scalar_type()) {
    case at::kFloat: return BATON_F32;
    case at::kDouble: return BATON_F64;
    case at::kHalf: return BATON_F16;
    case at::kBFloat16: return BATON_BF16;
    case at::kInt: return BATON_I32;
    case at::kLong: return BATON_I64;
    default: return -1;
  }
}

void bind_capi(py::capsule capi) {
  auto *p = static_cast<const baton_capi *>(capi.get_pointer());
  if (capi.name() == nullptr || std::string(capi.name()) != BATON_CAPI_NAME || p->version != BATON_CAPI_VERSION)
    throw std::runtime_error("baton.torch._work: baton._baton's capsule is from another version; rebuild the package");
  g_capi = p;
  if (!g_completer) g_completer = new Completer();
}

bool takes(const at::Tensor &t) { return t.device().is_cpu() && t.is_contiguous() && baton_dtype_of(t) >= 0; }

// In-place asynchronous all-reduce of each tensor (takes() them all), as one Work; call it without the GIL. A
// start failure completes the Work with baton's message at once; a failure while running completes it later.
c10::intrusive_ptr<c10d::Work> start_allreduce(const std::vector<at::Tensor> &tensors, int op) {
  auto work = c10::make_intrusive<BatonWork>(tensors);
  Pending p;
  p.work = work;
  for (const auto &t : tensors) {
    void *w = nullptr;
    int rc = g_capi->allreduce_start(t.data_ptr(), static_cast<size_t>(t.numel()), baton_dtype_of(t), op, &w);
    if (rc < 0) {
      char msg[512];
      g_capi->describe(rc, "baton: asynchronous all-reduce", msg, sizeof msg);
      p.error = msg;
      break;
    }
    p.works.push_back(w);
  }
  if (p.works.empty() && !p.error.empty()) {
    work->complete(p.error);
    return work;
  }
  g_completer->push(std::move(p));
  return work;
}

// In-place asynchronous all-reduce of each (contiguous CPU) tensor, as one Work (the Python group's route). Raises
// ValueError for a tensor it cannot take (the caller checks first, so that is a bug); see start_allreduce.
c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> tensors, int op) {
  if (!g_capi) throw std::runtime_error("baton.torch._work: bind() was not called");
  for (const auto &t : tensors) {
    if (!takes(t))
      throw py::value_error("baton.torch._work.allreduce: tensors must be contiguous CPU tensors of f32, f64, f16, "
                            "bf16, int32 or int64");
  }
  py::gil_scoped_release nogil;
  return start_allreduce(tensors, op);
}

// baton's op for a torch ReduceOp, or -1 (the Python group then says what it supports).
int baton_op_of(const c10d::ReduceOp &op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return BATON_SUM;
    case c10d::ReduceOp::AVG: return BATON_AVG;
    case c10d::ReduceOp::PRODUCT: return BATON_PROD;
    case c10d::ReduceOp::MIN: return BATON_MIN;
    case c10d::ReduceOp::MAX: return BATON_MAX;
    default: return -1;
  }
}

// The process group torch holds (see the top of the file). The Python group decides, on a tensor's first calls,
// whether its storage is attached; once it says a tensor is settled (c10d.ProcessGroupBaton._settled) the front
// all-reduces that tensor itself. Tensors are known by their TensorImpl, checked alive through a weak pointer (a
// freed tensor's address may come back as another tensor, which is then unknown again).
class Group : public c10d::ProcessGroup {
 public:
  Group(int rank, int size, py::object group) : c10d::ProcessGroup(rank, size), py_(group.release().ptr()) {}
  // py_ is never released: the group may be destroyed after the interpreter (torch keeps it in C++ structures).

  const std::string getBackendName() const override { return "baton"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                           const c10d::AllreduceOptions &opts) override {
    int op = baton_op_of(opts.reduceOp);
    if (fast_.load(std::memory_order_relaxed) && op >= 0 && !tensors.empty() && settled_all(tensors)) {
      fast_calls_.fetch_add(1, std::memory_order_relaxed);
      if (PyGILState_Check()) {  // from Python (dist.all_reduce releases the GIL first; a direct call may not)
        py::gil_scoped_release nogil;
        return start_allreduce(tensors, op);
      }
      return start_allreduce(tensors, op);
    }
    py::gil_scoped_acquire gil;
    python_calls_.fetch_add(1, std::memory_order_relaxed);
    py::handle g(py_);
    auto work = g.attr("allreduce")(tensors, opts).cast<c10::intrusive_ptr<c10d::Work>>();
    if (op >= 0) {
      py::object settled = g.attr("_settled");
      for (const auto &t : tensors)
        if (takes(t) && settled(t).cast<bool>()) remember(t);
    }
    return work;
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                           const c10d::BroadcastOptions &opts) override {
    return to_python("broadcast", tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &out, std::vector<at::Tensor> &in,
                                           const c10d::AllgatherOptions &opts) override {
    return to_python("allgather", out, in, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &out, std::vector<std::vector<at::Tensor>> &in,
                                                const c10d::ReduceScatterOptions &opts) override {
    return to_python("reduce_scatter", out, in, opts);
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override {
    return to_python("barrier", opts);
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst, int tag) override {
    return to_python("send", tensors, dst, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src, int tag) override {
    return to_python("recv", tensors, src, tag);
  }

  py::object python() const { return py::reinterpret_borrow<py::object>(py_); }
  bool fast() const { return fast_.load(); }
  void set_fast(bool on) { fast_.store(on); }
  py::tuple calls() const { return py::make_tuple(fast_calls_.load(), python_calls_.load()); }

 private:
  // A collective the front does not run itself: the Python group's method of that name, with the GIL.
  template <typename... Args>
  c10::intrusive_ptr<c10d::Work> to_python(const char *method, Args &...args) {
    py::gil_scoped_acquire gil;
    return py::handle(py_).attr(method)(args...).template cast<c10::intrusive_ptr<c10d::Work>>();
  }

  bool settled_all(const std::vector<at::Tensor> &tensors) {
    std::lock_guard<std::mutex> g(mu_);
    for (const auto &t : tensors) {
      if (!takes(t)) return false;
      auto it = settled_.find(t.unsafeGetTensorImpl());
      if (it == settled_.end() || it->second.expired()) return false;
    }
    return true;
  }

  void remember(const at::Tensor &t) {
    std::lock_guard<std::mutex> g(mu_);
    if (settled_.size() >= sweep_at_) {  // forget tensors that are gone; grow the bound with what stays
      for (auto it = settled_.begin(); it != settled_.end();) it = it->second.expired() ? settled_.erase(it) : ++it;
      sweep_at_ = 2 * settled_.size() + 64;
    }
    settled_.insert_or_assign(t.unsafeGetTensorImpl(), c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr()));
  }

  PyObject *py_;  // the Python group (a strong reference, never dropped)
  std::atomic<bool> fast_{true};
  std::atomic<uint64_t> fast_calls_{0}, python_calls_{0};
  std::mutex mu_;
  std::unordered_map<c10::TensorImpl *, c10::weak_intrusive_ptr<c10::TensorImpl>> settled_;
  size_t sweep_at_ = 64;
};

}  // namespace

PYBIND11_MODULE(_work, m) {
  m.doc() = "baton.torch's C++ work layer for the torch.distributed backend (see baton/torch/c10d.py)";
  py::module::import("torch.distributed");  // registers c10d.Work with pybind11 before we return one
  m.def("bind", &bind_capi, "bind(baton._baton._capi): the C functions to run on");
  m.def("allreduce", &allreduce, py::arg("tensors"), py::arg("op"),
        "allreduce(tensors, op) -> torch.distributed Work: in-place asynchronous all-reduce, completed in C++");
  py::class_<Group, c10d::ProcessGroup, c10::intrusive_ptr<Group>>(
      m, "Group", "the C++ front of the baton process group: DDP's steady-state all-reduces in C++, the rest in the "
                  "Python group it owns (see baton/torch/c10d.py)")
      .def(py::init([](int rank, int size, py::object group) {
             if (!g_capi) throw std::runtime_error("baton.torch._work: bind() was not called");
             return c10::make_intrusive<Group>(rank, size, std::move(group));
           }),
           py::arg("rank"), py::arg("size"), py::arg("group"))
      .def_property_readonly("_python", &Group::python, "the Python group (c10d.ProcessGroupBaton) behind the front")
      .def_property("_fast", &Group::fast, &Group::set_fast,
                    "whether settled all-reduces run in C++ (False: every call goes to the Python group)")
      .def("_calls", &Group::calls, "(all-reduces run by the front, all-reduces handed to the Python group)");
}
