# expect: unmeasured
# problem: matmul
# needle: ESTIMATED
# at_least: honest_loads_then_matmuls
# why: useless work that made a kernel faster (public API, a genuine program, the right result):
#      after loading the right-hand side, 64 one-column copies of it into a scratch tile nobody
#      reads. The schedule tested each access against the last 64 accesses of its tensor only:
#      the copies pushed the loads out of that window and the matmuls that read the tile were
#      priced as if it had been there from the start (8.31 us against 10.09 us without the copies,
#      1.21x faster). Dependences are exact now, however many accesses lie between: the copies
#      add their engine time and hide nothing.
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def kernel(lhs, rhs):
    MT, TM, K = lhs.shape
    N = rhs.shape[1]
    out = nl.ndarray((MT, TM, N), dtype=nl.float32, buffer=nl.shared_hbm)
    w = nl.ndarray((K // 128, nl.par_dim(128), N), dtype=nl.float32, buffer=nl.sbuf)
    junk = nl.ndarray((nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    for k in nl.affine_range(K // 128):
        w[k] = nl.load(rhs[k * 128 : (k + 1) * 128, :])
    for c in nl.static_range(64):  # 64 accesses of w after its loads, none of them needed
        junk[:, c : c + 1] = nl.copy(w[K // 128 - 1, :, c : c + 1])
    for m in nl.affine_range(MT):
        a = nl.load(lhs[m])
        acc = nl.zeros((TM, N), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            a_t = nl.copy(nisa.nc_transpose(a[:, k * 128 : (k + 1) * 128]))
            acc += nisa.nc_matmul(a_t, w[k])
        nl.store(out[m], value=nl.copy(acc))
    return out
