#include "shm_window.h"

#include <cstring>
#include <new>

#include "zt/error.h"
#include "zt/store.h"

namespace zt::ucx {

namespace {

void put_u64(std::vector<uint8_t>& buf, uint64_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  buf.insert(buf.end(), p, p + sizeof(v));
}

uint64_t get_u64(const std::vector<uint8_t>& buf, size_t at) {
  uint64_t v = 0;
  if (at + sizeof(v) <= buf.size()) std::memcpy(&v, buf.data() + at, sizeof(v));
  return v;
}

}  // namespace

std::unique_ptr<ShmWindow> ShmWindow::create(Transport& transport, const Group& group, Store& store,
                                             const std::string& prefix,
                                             std::chrono::milliseconds timeout, size_t capacity) {
  std::unique_ptr<ShmWindow> w(new ShmWindow(transport, capacity));
  const int n = group.size(), r = group.rank;
  w->bases_.assign(n, nullptr);
  w->rkeys_.assign(n, nullptr);

  // 1. Allocate and publish this rank's segment: "ok" flag, address, packed rkey.
  std::vector<uint8_t> mine;
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.length = kDataOffset + 2 * capacity;
  params.flags = UCP_MEM_MAP_ALLOCATE;
  void* rkey_buf = nullptr;
  size_t rkey_len = 0;
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  bool ok = ucp_mem_map(transport.context(), &params, &w->memh_) == UCS_OK &&
            ucp_mem_query(w->memh_, &attr) == UCS_OK &&
            ucp_rkey_pack(transport.context(), w->memh_, &rkey_buf, &rkey_len) == UCS_OK;
  if (ok) {
    w->bases_[r] = static_cast<uint8_t*>(attr.address);
    new (w->bases_[r]) ShmControl();  // flags start at epoch 0
    put_u64(mine, 1);
    put_u64(mine, reinterpret_cast<uint64_t>(attr.address));
    const auto* k = static_cast<const uint8_t*>(rkey_buf);
    mine.insert(mine.end(), k, k + rkey_len);
    ucp_rkey_buffer_release(rkey_buf);
  } else {
    put_u64(mine, 0);
  }
  store.set(prefix + "segment/" + std::to_string(r), mine);

  // 2. Map every peer's segment directly, if UCX can (same host, shared-memory transport).
  for (int p = 0; p < n && ok; ++p) {
    if (p == r) continue;
    std::vector<uint8_t> theirs = store.get(prefix + "segment/" + std::to_string(p), timeout);
    if (get_u64(theirs, 0) != 1) {
      ok = false;
      break;
    }
    uint64_t address = get_u64(theirs, 8);
    void* mapped = nullptr;
    ok = ucp_ep_rkey_unpack(transport.endpoint(group.peer(p)), theirs.data() + 16, &w->rkeys_[p]) ==
             UCS_OK &&
         ucp_rkey_ptr(w->rkeys_[p], address, &mapped) == UCS_OK;
    w->bases_[p] = static_cast<uint8_t*>(mapped);
  }

  // 3. Agree: the window is used only if every rank mapped every peer.
  store.set(prefix + "mapped/" + std::to_string(r), {static_cast<uint8_t>(ok ? 1 : 0)});
  bool all = ok;
  for (int p = 0; p < n; ++p) {
    std::vector<uint8_t> v = store.get(prefix + "mapped/" + std::to_string(p), timeout);
    all = all && !v.empty() && v[0] == 1;
  }
  if (!all) return nullptr;
  return w;
}

ShmWindow::~ShmWindow() {
  for (auto rkey : rkeys_) {
    if (rkey) ucp_rkey_destroy(rkey);
  }
  if (memh_) ucp_mem_unmap(transport_.context(), memh_);
}

}  // namespace zt::ucx
