import { expectTypeOf, test } from 'vitest';
import { type Money, money, sum } from './amount.ts';

test('Money keeps exact bigint minor units', () => {
  expectTypeOf(money('1', 'USD').minor).toEqualTypeOf<bigint>();
  expectTypeOf(sum).returns.toEqualTypeOf<Money>();
  expectTypeOf(money('1', 'USD').allocate).parameter(0).toEqualTypeOf<number[]>();
});
