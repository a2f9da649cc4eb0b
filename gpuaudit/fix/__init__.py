"""`gpuaudit fix`: every recommendation gpuaudit can make a change of, as a change a team
reviews. A stage between the checks and the audit: the audit result carries the plan
(`changes.Plan`, made by `plans.plan` from the ranked findings), so that every report lists the
changes without computing anything, and `gpuaudit fix` writes them (`directory`).

A change is made to the object a team edits, found through the pods' owners
(`gpuaudit.inventory.owners`): a patch of the object as read (`owned`: scale to zero, suspend;
`kueue`: a ClusterQueue's quota; `queue_quota`: a Volcano or KAI Queue's; `priority`: a pod
template's PriorityClass; `memory_limits`: an OOM-killed container's memory limit in its pod
template; `cpu_limits`: a CPU-starved container's CPU limit and request in its pod template;
`warm_nodes`: a Karpenter NodePool's consolidation), a new object
(`priority`: a PriorityClass), or commands (`drain`: cordon and drain; a bare pod's deletion;
`warm_nodes`: the cluster autoscaler's). The plan keeps the changes coherent with the findings
(`plans.coherent`).
Every patch is applied to the object as read (`patching`) and validated (`validate`) before it
is written; gpuaudit itself never changes the cluster.
"""
