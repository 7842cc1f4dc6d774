import React from "react";

type Props = { hits: string[] };

// One hit per line.
export function HitList({ hits }: Props) {
  return (
    <ul>
      {hits.map((h) => (
        <li key={h}>{h}</li>
      ))}
    </ul>
  );
}

export const Empty = () => <p>No results</p>;
