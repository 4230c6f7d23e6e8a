#!/usr/bin/env python3
# Prints criterion point estimates (time per iteration, elements/s) from a `cargo bench` log:
#   python3 bench/scripts/criterion_estimates.py bench.log
import re,sys
log=open(sys.argv[1]).read()
# criterion: name line then time: [lo med hi] then thrpt: [lo med hi]
crit={}
for m in re.finditer(r'^(\S+/\S+)\s*\n?\s+time:\s+\[(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\]\s*\n\s+thrpt:\s+\[(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\]', log, re.M):
    name=m.group(1)
    t=float(m.group(4)); tu=m.group(5)
    f={'ns':1e-3,'µs':1,'ms':1e3,'s':1e6}[tu]
    th=float(m.group(10)); thu=m.group(11)
    g={'elem/s':1,'Kelem/s':1e3,'Melem/s':1e6}[thu]
    crit[name]=(t*f, th*g)
for k,v in crit.items(): print(f"CRIT {k} estimate_us={v[0]:.1f} estimate_per_s={v[1]:.0f}")
