/** Counts kept in a Map by name, forgotten at zero so that the map does not grow with every name seen. */
export function decrement(map: Map<string, number>, key: string): void {
  const n = (map.get(key) ?? 1) - 1;
  if (n === 0) map.delete(key);
  else map.set(key, n);
}
